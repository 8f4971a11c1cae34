package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// errNoMachine is wrapped when the configured machine does not exist.
var errNoMachine = errors.New("machine does not exist")

// machineState returns the smolvm state of the machine, wrapping
// errNoMachine when there is none.
func machineState(ctx context.Context, b *Box, name string) (smolvm.Machine, error) {
	// One smolvm call: `machine status` of a missing machine fails with
	// "not found" (smolvm.ErrNotFound), so no `machine ls` is needed first.
	m, err := b.vm.Status(ctx, name)
	if smolvm.IsNotFound(err) {
		// After an interrupted restore, init is not the way back.
		if err := checkInterruptedRestore(b, ""); err != nil {
			return smolvm.Machine{}, fmt.Errorf("%w: %q: %w", errNoMachine, name, err)
		}
		return smolvm.Machine{}, &userr.Error{Err: fmt.Errorf("%w: %q", errNoMachine, name), Code: userr.ExitNoBox,
			Next: "run hermes-box init first (or hermes-box restore NAME, with a name hermes-box backups prints)"}
	}
	return m, err
}

// waitPort polls until something accepts on the SSH port; w beats
// between the polls.
func waitPort(ctx context.Context, b *Box, w *waiter, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if err := w.beat(ctx, nil); err != nil {
			return err
		}
		if err := sleep(ctx, b.timing.pollInterval); err != nil {
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
func verifyRunning(ctx context.Context, b *Box) error {
	return verifyMachine(ctx, b, b.cfg.MachineName, b.cfg.SSHPort)
}

// verifyMachine is verifyRunning for machine name with its SSH on port (a
// restore's candidate publishes only SSH).
func verifyMachine(ctx context.Context, b *Box, name string, port int) error {
	ctx, cancel := context.WithTimeout(ctx, b.timing.startupDeadline)
	defer cancel()
	ports := []int{port}
	if b.cfg.ExecutorEnabled && name == b.cfg.MachineName {
		ports = append(ports, b.cfg.ExecutorPort)
	}
	done := b.ui.Step("listener", fmt.Sprintf("SSH of %s on 127.0.0.1:%d, loopback only", name, port))
	err := checkListeners(ctx, b, name, ports)
	done(err)
	if err != nil {
		return err
	}
	tr, err := sshRelayTo(b, name, port)
	if err != nil {
		return err
	}
	done = b.ui.Step("health", "waiting for the agent")
	err = waitHealthy(ctx, b, waiting(b, name, "the agent of "+name+" to report healthy"), tr)
	done(err)
	if err != nil || !b.cfg.ExecutorEnabled || name != b.cfg.MachineName {
		return err
	}
	return refreshDiscovery(ctx, b, name, tr)
}

// checkListeners waits for machine's published ports and checks their
// binding.
func checkListeners(ctx context.Context, b *Box, machine string, ports []int) error {
	for _, p := range ports {
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(p))
		if err := waitPort(ctx, b, waiting(b, machine, addr+" to accept"), addr); err != nil {
			return err
		}
		if err := b.listen.CheckLoopback(ctx, p); err != nil {
			return fmt.Errorf("refusing an unsafe box: %w", err)
		}
	}
	return nil
}

// waitHealthy polls the agent's health until it answers and its report
// passes the deep check. Services still starting (STARTING, BACKOFF) are
// waited for, as the reference waits for supervisorctl to say RUNNING; a
// service that gave up (FATAL) fails at once, as do a host key mismatch and
// sshd refusing the project key. The startup deadline in ctx bounds the
// whole wait. Once the cheap report passes, the box is ready only when a
// deep one (the installed tools run) passes too, so a half-provisioned box
// is never called ready.
func waitHealthy(ctx context.Context, b *Box, w *waiter, tr relay.Transport) error {
	return waitFor(ctx, b, w, tr, true)
}

// waitRunning is waitHealthy without the deep report: for a box already
// proven ready whose gateway was only restarted.
func waitRunning(ctx context.Context, b *Box, w *waiter, tr relay.Transport) error {
	return waitFor(ctx, b, w, tr, false)
}

// waitFor is waitHealthy (wantDeep) or waitRunning; w beats between the
// polls (a machine that stopped ends the wait at once). A box that does not
// answer maxNoAnswers calls in a row ends the wait (noAnswers), but one
// that lets the cheap health's deadline pass is not counted for the first
// healthGrace of the wait; a box still booting (the relay refused or
// dropped) or a report that says starting is waited for.
func waitFor(ctx context.Context, b *Box, w *waiter, tr relay.Transport, wantDeep bool) error {
	var last error
	unanswered := noAnswers{lateFrom: time.Now().Add(healthGrace)}
	var same sameFailures
	deep := false
	for {
		report, err := client(b, tr).Health(ctx, deep)
		if err := unanswered.note(err); err != nil {
			return err
		}
		if err := same.note(err); err != nil {
			return err
		}
		if err == nil {
			if err = deepCheck(report); err == nil && (deep || !wantDeep) {
				return nil
			}
			if err == nil {
				// The deep report is asked of a box whose cheap one
				// passed, and its deadline (2 min) is grace enough.
				deep, unanswered.lateFrom = true, time.Time{}
				continue
			}
			if gaveUp(report) || errors.Is(err, ErrGate) {
				return err
			}
		} else if errors.Is(err, relay.ErrHostKeyMismatch) || errors.Is(err, relay.ErrAuthRefused) {
			return err
		}
		last = err
		if err := w.beat(ctx, last); err != nil {
			return err
		}
		if serr := sleep(ctx, b.timing.pollInterval); serr != nil {
			return fmt.Errorf("the box was not healthy within %v: %w", b.timing.startupDeadline, last)
		}
	}
}

// maxNoAnswers is how many calls in a row a readiness wait lets the box
// not answer (agent.NoAnswerError: the verb's deadline passed, or its
// answer broke its cap or the protocol) before it ends the command. One is
// not enough: under TCG a box still booting may let a call pass its
// deadline once (make e2e's boxes report healthy 5-10 s after their SSH
// port accepts, and health's deadline is 30 s). Three in a row is at least
// 90 s of silence from a box that took the calls (6 min for health --deep,
// 24 s for the builder's netcheck), where the startup deadline held the
// command 20 min (2 h with the Executor).
const maxNoAnswers = 3

// healthGrace is how long a health wait takes a call that passed its
// deadline for a box still coming up rather than one that does not answer.
// Under TCG a box that has just booted can let health's 30 s pass for
// more than a minute: make e2e's replacement restore, on a loaded machine,
// missed three in a row after the cut-over (91 s) and was rolled back; why
// that box was slow was not measured. An answer that
// breaks a cap or the protocol counts at once; a box that stays silent
// ends the wait about 6 min in, not 20. The deep report, asked once the
// cheap one passed, has 2 min a call and no grace: three in a row, 6 min.
const healthGrace = 5 * time.Minute

// noAnswers counts a wait's calls in a row that the box did not answer; a
// call that passed its deadline before lateFrom is not counted.
type noAnswers struct {
	n        int
	lateFrom time.Time
}

// note counts the call that ended with err (nil: answered); at
// maxNoAnswers in a row it returns the error that ends the wait, which
// names the verb and what to run next.
func (c *noAnswers) note(err error) error {
	var na *agent.NoAnswerError
	if !errors.As(err, &na) {
		c.n = 0
		return nil
	}
	if na.Late && time.Now().Before(c.lateFrom) {
		return nil
	}
	if c.n++; c.n < maxNoAnswers {
		return nil
	}
	return agent.Unanswered(c.n, na)
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

// ErrGate is a box whose approval gate is not installed and active as
// provisioned (its gate step was skipped or undone).
var ErrGate = errors.New("the approval gate is not installed and active as provisioned; the box is refused")

// deepCheck judges a report: unhealthy, a service not RUNNING or an
// approval gate that is not installed and active as provisioned fails.
func deepCheck(r *health.Report) error {
	c, ok := r.Checks[health.CheckGate]
	if !ok {
		// Every agent that provisioned a gate reports it: a report without
		// the check is a box whose gate cannot be shown to be there.
		return fmt.Errorf("%w: the box reports no %q check", ErrGate, health.CheckGate)
	}
	if c.Status != health.StatusHealthy {
		// Whatever severity the box gave it: a box without its gate
		// runs the agent's commands unreviewed.
		return fmt.Errorf("%w: %s", ErrGate, termsafe.String(c.Message))
	}
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
	for i, p := range problems {
		problems[i] = termsafe.String(p)
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
func bootAndVerify(ctx context.Context, b *Box, name string) error {
	return bootAndVerifyAt(ctx, b, name, b.cfg.SSHPort, false)
}

// bootAndVerifyAt is bootAndVerify for a machine whose SSH is on port.
// A machine restored from a backup (restored) has its host key pinned
// first, out of band (it carries the backup's host keys), and gets no
// secrets: it runs a backup's code, and the box gets them from the
// restore once the cut-over is complete (Restore).
func bootAndVerifyAt(ctx context.Context, b *Box, name string, port int, restored bool) error {
	pin := restored
	secrets, deliver, err := startMachine(ctx, b, name)
	if restored {
		deliver = false
	}
	if err != nil {
		return err
	}
	// An init interrupted before it pinned the host key left none: the
	// key is read out of band, as init does.
	if _, kerr := keys.LoadHostKey(b.cfg.StateDir(), name); pin || errors.Is(kerr, fs.ErrNotExist) {
		err = pinHostKey(ctx, b, name)
	}
	if err == nil {
		err = verifyMachine(ctx, b, name, port)
	}
	if err == nil {
		err = afterStart(ctx, b, name, port, secrets, deliver)
	}
	if err != nil {
		stopErr := stopMachine(ctx, b, name)
		if stopErr != nil {
			return errors.Join(fmt.Errorf("%w; stopping the machine also failed", err), stopErr)
		}
		return fmt.Errorf("%w; the machine was stopped", err)
	}
	return nil
}
