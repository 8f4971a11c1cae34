package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// servicesStoppedMark is the state file a snapshot writes before it stops
// the box's services and removes once it started them again: the machine
// on its first line, then the services, one a line. A run that died in
// between (SIGKILL, a power cut) leaves it, and the next snapshot or
// restore starts them (resumeServices).
const servicesStoppedMark = "services-stopped"

// maxMarkBytes bounds what resumeServices reads of the mark.
const maxMarkBytes = 4 << 10

func servicesMarkPath(b *Box) string { return filepath.Join(b.cfg.StateDir(), servicesStoppedMark) }

// markServicesStopped records that a snapshot stops services of machine.
func markServicesStopped(b *Box, machine string, services []string) error {
	text := machine + "\n" + strings.Join(services, "\n") + "\n"
	if err := atomicfile.Write(servicesMarkPath(b), []byte(text), 0o600); err != nil {
		return fmt.Errorf("recording the services a snapshot stops: %w", err)
	}
	return nil
}

// unmarkServicesStopped removes the mark once the services run again.
func unmarkServicesStopped(b *Box) {
	_ = os.Remove(servicesMarkPath(b))
}

// readServicesMark reads the mark: the machine and its services (none
// when there is no mark).
func readServicesMark(b *Box) (machine string, services []string, err error) {
	f, err := os.Open(servicesMarkPath(b))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	buf := make([]byte, maxMarkBytes+1)
	n, _ := f.Read(buf)
	if n > maxMarkBytes {
		return "", nil, fmt.Errorf("%s is over %d bytes", servicesMarkPath(b), maxMarkBytes)
	}
	lines := strings.Fields(string(buf[:n]))
	if len(lines) == 0 {
		return "", nil, nil
	}
	return lines[0], lines[1:], nil
}

// resumeServices starts the services an earlier snapshot stopped and
// could not start again (it was killed, or its terminal closed before
// hermes-box handled that), when the box runs, and says so. It runs under
// the operation lock, before a snapshot or a restore does anything else.
func resumeServices(ctx context.Context, b *Box) {
	machine, services, err := readServicesMark(b)
	if err != nil {
		b.ui.Warn("%v", err)
		return
	}
	if machine != b.cfg.MachineName || len(services) == 0 {
		unmarkServicesStopped(b)
		return
	}
	m, err := machineState(ctx, b, machine)
	if err != nil || m.State != smolvm.StateRunning {
		// A box that starts starts every service.
		if err == nil {
			unmarkServicesStopped(b)
		}
		return
	}
	started, err := startStoppedServices(ctx, b, services)
	if len(started) > 0 {
		b.ui.Warn("an earlier snapshot was interrupted and left %s stopped; started again", strings.Join(started, ", "))
	}
	if err != nil {
		b.ui.Warn("could not start %s, which an interrupted snapshot left stopped: %v (hermes-box restart starts every service)",
			strings.Join(services, ", "), err)
		return
	}
	unmarkServicesStopped(b)
}

// startStoppedServices starts those of services that are not running, in
// the order given, and returns the ones it started.
func startStoppedServices(ctx context.Context, b *Box, services []string) ([]string, error) {
	tr, err := sshRelay(b)
	if err != nil {
		return nil, err
	}
	c := agent.New(tr, nil)
	st, err := c.ServicesStatus(ctx)
	if err != nil {
		return nil, err
	}
	var started []string
	for _, name := range services {
		i := slices.IndexFunc(st.Services, func(s protocol.ServiceStatus) bool { return s.Name == name })
		if i < 0 || st.Services[i].State == health.ServiceRunning {
			continue
		}
		if err := c.StartService(ctx, name); err != nil {
			return started, err
		}
		started = append(started, name)
	}
	return started, nil
}
