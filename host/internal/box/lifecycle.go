package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// Start starts the box and verifies it, under the operation lock.
func Start(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "start", withLock(b, func() error { return startBox(ctx, b) }))
}

// Stop stops the box's services, then the machine, under the operation
// lock.
func Stop(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "stop", withLock(b, func() error { return stopBox(ctx, b) }))
}

// Restart stops the box, then starts and verifies it, under one lock.
func Restart(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "restart", withLock(b, func() error {
		if err := stopBoxChecked(ctx, b, func(m smolvm.Machine) error { return checkExecutorWiring(b, m) }); err != nil {
			return err
		}
		return startBox(ctx, b)
	}))
}

// startBox starts the box, or verifies it when it already runs (a failed
// verification of a box that was already running does not stop it).
func startBox(ctx context.Context, b *Box) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := checkExecutorWiring(b, m); err != nil {
		return err
	}
	warnDrift(b)
	if m.State == smolvm.StateRunning {
		b.ui.Info("%s is already running; verifying it", m.Name)
		return verifyRunning(ctx, b)
	}
	if m.State == smolvm.StatePaused || m.State == smolvm.StatePausing {
		return &userr.Error{Err: fmt.Errorf("the box %s is %s (smolvm machine pause froze it); nothing was changed", m.Name, m.State),
			Next: "resume it with: smolvm machine resume --name " + m.Name + " (then hermes-box start verifies it)"}
	}
	if err := bootAndVerify(ctx, b, m.Name); err != nil {
		return err
	}
	b.ui.Info("%s is running and healthy: hermes-box ssh", m.Name)
	return nil
}

// stopBox asks the agent to stop every service (tolerating an agent that
// cannot), then stops the machine.
func stopBox(ctx context.Context, b *Box) error {
	return stopBoxChecked(ctx, b, func(smolvm.Machine) error { return nil })
}

// stopBoxChecked is stopBox that first runs check on the machine and
// changes nothing when it fails.
func stopBoxChecked(ctx context.Context, b *Box, check func(smolvm.Machine) error) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := check(m); err != nil {
		return err
	}
	if m.State != smolvm.StateRunning && m.State != smolvm.StateUnreachable {
		b.ui.Info("%s is %s; nothing to stop", m.Name, m.State)
		return nil
	}
	if m.State == smolvm.StateRunning {
		stopServices(ctx, b)
	}
	done := b.ui.Step("stop", m.Name)
	err = b.vm.Stop(ctx, m.Name)
	done(err)
	return err
}

// stopServices runs the agent's `services stop all` over the SSH relay. It
// only warns when that fails: the machine stop that follows ends them too.
func stopServices(ctx context.Context, b *Box) {
	tr, err := sshRelay(b)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
		defer cancel()
		done := b.ui.Step("services-stop", "all services")
		err = client(b, tr).StopService(ctx, "all")
		done(err)
	}
	var exit *agent.ExitError
	if errors.As(err, &exit) && exit.Code == 2 {
		b.ui.Warn("the agent has no services verb; stopping the machine directly")
		return
	}
	if err != nil {
		b.ui.Warn("could not stop the services gracefully (%v); stopping the machine", err)
	}
}

// Destroy stops and deletes the box and the builder, then forgets the
// box's pinned host key, under the operation lock. Images, backups and
// the SSH key are kept. It returns the machines it deleted.
func Destroy(ctx context.Context, b *Box) (deleted []string, err error) {
	err = withLock(b, func() error { return destroy(ctx, b, &deleted) })
	return deleted, err
}

func destroy(ctx context.Context, b *Box, deleted *[]string) error {
	for _, name := range []string{b.cfg.MachineName, b.cfg.BuilderName} {
		exists, err := b.vm.Exists(ctx, name)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		if name == b.cfg.MachineName {
			if err := stopBox(ctx, b); err != nil {
				b.ui.Warn("stopping %s: %v; deleting it anyway", name, err)
			}
		}
		done := b.ui.Step("delete", name)
		err = b.vm.Delete(ctx, name, true)
		done(err)
		if err != nil {
			return err
		}
		*deleted = append(*deleted, name)
		if name == b.cfg.MachineName {
			if err := moveAuditAnchorAside(ctx, b); err != nil {
				return err
			}
		}
	}
	unmarkBuilder(b)
	if err := forgetSettings(b); err != nil {
		return err
	}
	if err := keys.RemoveHostKey(b.cfg.StateDir(), b.cfg.MachineName); err != nil {
		return err
	}
	if err := os.Remove(knownHostsPath(b)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", knownHostsPath(b), err)
	}
	return nil
}

// knownHostsPath is the known_hosts file hermes-box writes for ssh.
func knownHostsPath(b *Box) string {
	return filepath.Join(b.cfg.StateDir(), filenames.KnownHosts)
}
