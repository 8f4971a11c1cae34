package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/health"
)

// client is the agent client over tr whose events are rendered on the
// box's UI.
func client(b *Box, tr relay.Transport) *agent.Client {
	return agent.New(tr, b.ui.Event)
}

// runningClient is the agent client over the SSH relay with the pinned
// host key, dialled at each call; its events are rendered on the box's UI.
func runningClient(b *Box) *agent.Client {
	return agent.Dialled(func() (relay.Transport, error) { return sshRelay(b) }, b.ui.Event)
}

// QuietClient is the agent client over the SSH relay once the box runs,
// dropping the box's events; a box that does not run is refused, saying
// what for.
func QuietClient(ctx context.Context, b *Box, purpose string) (*agent.Client, error) {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	if m.State != smolvm.StateRunning {
		return nil, fmt.Errorf("%s is %s: %s (hermes-box start)", m.Name, m.State, purpose)
	}
	tr, err := sshRelay(b)
	if err != nil {
		return nil, err
	}
	return agent.New(tr, nil), nil
}

// sshRelay is the SSH transport to the runtime box, with the pinned host key.
func sshRelay(b *Box) (*relay.SSH, error) {
	return sshRelayTo(b, b.cfg.MachineName, b.cfg.SSHPort)
}

// sshRelayTo is the SSH transport to machine name on loopback port, with
// the host key pinned for that machine.
func sshRelayTo(b *Box, name string, port int) (*relay.SSH, error) {
	keyPath := b.cfg.SSHKeyPath()
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		return nil, userr.NotInitialised("no project SSH key at " + keyPath)
	} else if err != nil {
		return nil, fmt.Errorf("project SSH key %s: %w", keyPath, err)
	}
	signer, err := keys.EnsureProjectKey(keyPath, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	hostKey, err := keys.LoadHostKey(b.cfg.StateDir(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no pinned host key for %s (it is pinned by hermes-box init): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return &relay.SSH{Addr: addr, User: b.sshUser, Signer: signer, HostKey: hostKey,
		Command: b.relayCmd, DialTimeout: b.timing.callTimeout}, nil
}

// execRelay is the smolvm-exec transport to a machine.
func execRelay(b *Box, machine string) *relay.Exec {
	return &relay.Exec{Machine: machine, Execer: b.vm}
}

// directRelay is the smolvm-exec transport that runs a verb the agent
// refuses through the relay (builder and out-of-band verbs) directly.
func directRelay(b *Box, machine string) *relay.Exec {
	tr := execRelay(b, machine)
	tr.Direct = true
	return tr
}

// healthOf asks the agent for its report (the cheap checks, as status shows).
func healthOf(ctx context.Context, b *Box, tr relay.Transport) (*health.Report, error) {
	return client(b, tr).Health(ctx, false)
}

// tail is the last line or so of a command's stderr, for error messages.
func tail(b []byte) string {
	const max = 400
	s := string(b)
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	if s == "" {
		return "no output"
	}
	return s
}
