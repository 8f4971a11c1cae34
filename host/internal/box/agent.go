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
func (b *Box) client(tr relay.Transport) *agent.Client {
	return agent.New(tr, b.ui.Event)
}

// runningClient is the agent client over the SSH relay with the pinned
// host key, dialled at each call; its events are rendered on the box's UI.
func (b *Box) runningClient() *agent.Client {
	return agent.Dialled(func() (relay.Transport, error) { return b.sshRelay() }, b.ui.Event)
}

// QuietClient is the agent client over the SSH relay once the box runs,
// dropping the box's events; a box that does not run is refused, saying
// what for.
func (b *Box) QuietClient(ctx context.Context, purpose string) (*agent.Client, error) {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	if m.State != smolvm.StateRunning {
		return nil, fmt.Errorf("%s is %s: %s (hermes-box start)", m.Name, m.State, purpose)
	}
	tr, err := b.sshRelay()
	if err != nil {
		return nil, err
	}
	return agent.New(tr, nil), nil
}

// sshRelay is the SSH transport to the runtime box, with the pinned host key.
func (b *Box) sshRelay() (*relay.SSH, error) {
	return b.sshRelayTo(b.cfg.MachineName, b.cfg.SSHPort)
}

// sshRelayTo is the SSH transport to machine name on loopback port, with
// the host key pinned for that machine.
func (b *Box) sshRelayTo(name string, port int) (*relay.SSH, error) {
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
func (b *Box) execRelay(machine string) *relay.Exec {
	return &relay.Exec{Machine: machine, Execer: b.vm}
}

// directRelay is the smolvm-exec transport that runs a verb the agent
// refuses through the relay (builder and out-of-band verbs) directly.
func (b *Box) directRelay(machine string) *relay.Exec {
	tr := b.execRelay(machine)
	tr.Direct = true
	return tr
}

// health asks the agent for its report (the cheap checks, as status shows).
func (b *Box) health(ctx context.Context, tr relay.Transport) (*health.Report, error) {
	return b.client(tr).Health(ctx, false)
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
