package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// errNoMachine is wrapped when the configured machine does not exist.
var errNoMachine = errors.New("machine does not exist")

// machineState returns the smolvm state of the machine, wrapping
// errNoMachine when there is none.
func (a *app) machineState(ctx context.Context, name string) (smolvm.Machine, error) {
	exists, err := a.vm.Exists(ctx, name)
	if err != nil {
		return smolvm.Machine{}, err
	}
	if !exists {
		// After an interrupted restore, init is not the way back.
		if err := a.checkInterruptedRestore(""); err != nil {
			return smolvm.Machine{}, fmt.Errorf("%w: %q: %w", errNoMachine, name, err)
		}
		return smolvm.Machine{}, fmt.Errorf("%w: %q (run hermes-box init first)", errNoMachine, name)
	}
	return a.vm.Status(ctx, name)
}

// sshRelay is the SSH transport to the runtime box, with the pinned host key.
func (a *app) sshRelay() (*relay.SSH, error) {
	return a.sshRelayTo(a.cfg.MachineName, a.cfg.SSHPort)
}

// sshRelayTo is the SSH transport to machine name on loopback port, with
// the host key pinned for that machine.
func (a *app) sshRelayTo(name string, port int) (*relay.SSH, error) {
	keyPath := a.cfg.SSHKeyPath()
	if _, err := os.Stat(keyPath); err != nil {
		return nil, fmt.Errorf("project SSH key %s: %w (run hermes-box init)", keyPath, err)
	}
	signer, err := keys.EnsureProjectKey(keyPath, a.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	hostKey, err := keys.LoadHostKey(a.cfg.StateDir(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no pinned host key for %s (it is pinned by hermes-box init): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return &relay.SSH{Addr: addr, User: a.sshUser, Signer: signer, HostKey: hostKey,
		Command: a.relayCmd, DialTimeout: a.timing.callTimeout}, nil
}

// execRelay is the smolvm-exec transport to a machine.
func (a *app) execRelay(machine string) *relay.Exec {
	return &relay.Exec{Machine: machine, Execer: a.vm}
}

// agent runs an agent verb and renders its events; its exit status is
// returned as an *agentExit error when non-zero.
func (a *app) agent(ctx context.Context, tr relay.Transport, stdin io.Reader, stdout io.Writer, argv ...string) error {
	req := protocol.Request{ProtocolVersion: protocol.Version, Argv: argv}
	code, err := tr.Run(ctx, req, stdin, stdout, a.ui.Event)
	if err != nil {
		return err
	}
	if code != 0 {
		return &agentExit{verb: argv[0], code: code}
	}
	return nil
}

// agentExit is an agent verb that exited non-zero; hermes-box exits with
// the same status.
type agentExit struct {
	verb string
	code int
}

func (e *agentExit) Error() string {
	return fmt.Sprintf("agent %s exited with status %d", e.verb, e.code)
}
func (e *agentExit) ExitCode() int { return e.code }

// health asks the agent for its report (the cheap checks, as status shows).
func (a *app) health(ctx context.Context, tr relay.Transport) (*health.Report, error) {
	return a.healthReport(ctx, tr, false)
}

// healthReport asks the agent for its report; deep also runs the
// installed tools (hermes, the messaging extra, node, npm, tmux, codex).
func (a *app) healthReport(ctx context.Context, tr relay.Transport, deep bool) (*health.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timing.callTimeout)
	defer cancel()
	var out bytes.Buffer
	argv := []string{"health", "--json"}
	if deep {
		argv = append(argv, "--deep")
	}
	if err := a.agent(ctx, tr, nil, &out, argv...); err != nil {
		return nil, err
	}
	return health.Decode(out.Bytes())
}

// waitPort polls until something accepts on the SSH port.
func (a *app) waitPort(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if err := sleep(ctx, a.timing.pollInterval); err != nil {
			return fmt.Errorf("waiting for %s: %w", addr, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// verifyRunning checks a running box: the SSH port accepts, every published
// port listens on loopback only, the agent answers over the SSH relay
// (bounded readiness loop), and one deep check of its report passes.
func (a *app) verifyRunning(ctx context.Context) error {
	return a.verifyMachine(ctx, a.cfg.MachineName, a.cfg.SSHPort)
}

// verifyMachine is verifyRunning for machine name with its SSH on port (a
// restore's candidate publishes only SSH).
func (a *app) verifyMachine(ctx context.Context, name string, port int) error {
	ctx, cancel := context.WithTimeout(ctx, a.timing.startupDeadline)
	defer cancel()
	ports := []int{port}
	if a.cfg.ExecutorEnabled && name == a.cfg.MachineName {
		ports = append(ports, a.cfg.ExecutorPort)
	}
	done := a.ui.Step("listener", fmt.Sprintf("SSH of %s on 127.0.0.1:%d, loopback only", name, port))
	err := a.checkListeners(ctx, ports)
	done(err)
	if err != nil {
		return err
	}
	tr, err := a.sshRelayTo(name, port)
	if err != nil {
		return err
	}
	done = a.ui.Step("health", "waiting for the agent")
	err = a.waitHealthy(ctx, tr)
	done(err)
	return err
}

// checkListeners waits for the published ports and checks their binding.
func (a *app) checkListeners(ctx context.Context, ports []int) error {
	for _, p := range ports {
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(p))
		if err := a.waitPort(ctx, addr); err != nil {
			return err
		}
		if err := a.listen.CheckLoopback(ctx, p); err != nil {
			return fmt.Errorf("refusing an unsafe box: %w", err)
		}
	}
	return nil
}

// waitHealthy polls the agent's health until it answers and its report
// passes the deep check. Services still starting (STARTING, BACKOFF) are
// waited for, as the reference waits for supervisorctl to say RUNNING; a
// service that gave up (FATAL) fails at once, as do a host key mismatch and
// sshd refusing the project key.
// The startup deadline in ctx bounds the whole wait. Once the cheap report
// passes, the box is ready only when a deep one (the installed tools run)
// passes too, so a half-provisioned box is never called ready.
func (a *app) waitHealthy(ctx context.Context, tr relay.Transport) error {
	var last error
	deep := false
	for {
		report, err := a.healthReport(ctx, tr, deep)
		if err == nil {
			if err = deepCheck(report); err == nil && deep {
				return nil
			}
			if err == nil {
				deep = true
				continue
			}
			if gaveUp(report) {
				return err
			}
		} else if errors.Is(err, relay.ErrHostKeyMismatch) || errors.Is(err, relay.ErrAuthRefused) {
			return err
		}
		last = err
		if serr := sleep(ctx, a.timing.pollInterval); serr != nil {
			return fmt.Errorf("the box was not healthy within %v: %w", a.timing.startupDeadline, last)
		}
	}
}

// gaveUp reports whether a supervised service stopped trying (FATAL).
func gaveUp(r *health.Report) bool {
	for _, s := range r.Services {
		if s.State == health.ServiceFatal {
			return true
		}
	}
	return false
}

// deepCheck judges a report: unhealthy or a service not RUNNING fails.
func deepCheck(r *health.Report) error {
	var problems []string
	for code, c := range r.Checks {
		if c.Status != health.StatusHealthy && c.Severity != health.SeverityInfo {
			problems = append(problems, fmt.Sprintf("%s %s: %s", code, c.Status, c.Message))
		}
	}
	for _, s := range r.Services {
		if s.State != health.ServiceRunning {
			problems = append(problems, fmt.Sprintf("service %s is %s", s.Name, s.State))
		}
	}
	if r.Status == health.StatusUnhealthy || hasServiceProblem(r) {
		return fmt.Errorf("box is %s: %s", r.Status, strings.Join(problems, "; "))
	}
	return nil
}

func hasServiceProblem(r *health.Report) bool {
	for _, s := range r.Services {
		if s.State != health.ServiceRunning {
			return true
		}
	}
	return false
}

// bootAndVerify starts a machine and verifies it; on failure it stops the
// machine again and says why.
func (a *app) bootAndVerify(ctx context.Context, name string) error {
	return a.bootAndVerifyAt(ctx, name, a.cfg.SSHPort, false)
}

// bootAndVerifyAt is bootAndVerify for a machine whose SSH is on port;
// pin first pins its host key out of band (a machine restored from a
// backup carries the backup's host keys).
func (a *app) bootAndVerifyAt(ctx context.Context, name string, port int, pin bool) error {
	done := a.ui.Step("start", name)
	err := a.vm.Start(ctx, name)
	done(err)
	if err != nil {
		return err
	}
	if pin {
		err = a.pinHostKey(ctx, name)
	}
	if err == nil {
		err = a.verifyMachine(ctx, name, port)
	}
	if err != nil {
		stopErr := a.stopMachine(name)
		if stopErr != nil {
			return errors.Join(fmt.Errorf("%w; stopping the machine also failed", err), stopErr)
		}
		return fmt.Errorf("%w; the machine was stopped", err)
	}
	return nil
}

// stopMachine stops a machine on a fresh, bounded context, so that it
// works during cleanup after the operation's context ended.
func (a *app) stopMachine(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.timing.cleanupTimeout)
	defer cancel()
	return a.vm.Stop(ctx, name)
}

// removeMachine stops and deletes a machine on a fresh, bounded context.
func (a *app) removeMachine(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*a.timing.cleanupTimeout)
	defer cancel()
	exists, err := a.vm.Exists(ctx, name)
	if err != nil || !exists {
		return err
	}
	return a.vm.Delete(ctx, name, true)
}
