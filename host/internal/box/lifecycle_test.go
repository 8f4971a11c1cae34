package box

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/health"
)

// TestLifecycleVerbs runs init, then stop, status, start, restart, logs,
// ssh and destroy on the box, each verb in-process against the fake smolvm
// and Debian's sshd, checking each one's smolvm conversation.
func TestLifecycleVerbs(t *testing.T) {
	p := newProject(t)
	p.initBox()
	status := []string{"machine status --name hermes-box --json"}

	calls, err := p.do(Stop)
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	boxtest.ExpectCalls(t, calls, append(status, "machine stop --name hermes-box"))
	if st := p.inspect(); st.State != StateStopped || st.Status != health.StatusUnhealthy {
		t.Errorf("stopped box: state %q status %q", st.State, st.Status)
	}

	calls, err = p.do(Start)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, p.ui.text())
	}
	boxtest.ExpectCalls(t, calls, append(append(status, "--version"), boxtest.Started(boxtest.Machine)...))

	calls, err = p.do(Restart)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	// The release is checked before the box stops.
	boxtest.ExpectCalls(t, calls, append(append(status, "--version", "machine stop --name hermes-box"), append(status, boxtest.Started(boxtest.Machine)...)...))

	st := p.inspect()
	if st.Box.State != string(health.StatusHealthy) || st.Status != health.StatusHealthy || st.Agent.Version == "" {
		t.Errorf("running box: state %q report %+v", st.State, st.Report)
	}
	services, err := Services(p.ctx(), p.box())
	if err != nil || strings.Join(services, ",") != "sshd,hermes" {
		t.Errorf("services %v (%v), want sshd and hermes", services, err)
	}

	if state, err := MachineState(p.ctx(), p.box()); err != nil || state != StateRunning {
		t.Errorf("machine state %q %v", state, err)
	}
	c, err := QuietClient(p.ctx(), p.box(), "to test")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Health(p.ctx(), false); err != nil || r.Agent.Version == "" {
		t.Errorf("the quiet client's health: %+v %v", r, err)
	}
	// The pin is the box's key: nothing to confirm, nothing changed.
	ch, err := RepinHostKey(p.ctx(), p.box(), func(old, new string) (bool, error) {
		t.Errorf("asked to confirm %s -> %s", old, new)
		return false, nil
	})
	if err != nil || ch.Changed || ch.Old != ch.New || ch.New != keys.Fingerprint(p.SSHD.HostKey) {
		t.Errorf("repin of the pinned key: %+v %v", ch, err)
	}
	// Nothing published Executor's port: its listener check refuses.
	if err := CheckExecutorListener(p.ctx(), p.box()); err == nil || !strings.Contains(err.Error(), "refusing to use Executor's port") {
		t.Errorf("the listener check of an Executor nobody serves: %v", err)
	}

	var out bytes.Buffer
	if err := Logs(p.ctx(), p.box(), &out, "hermes", 3, false); err != nil || out.String() != "hermes line 1\nhermes line 2\nhermes line 3\n" {
		t.Errorf("logs: %q %v", out.String(), err)
	}
	if err := Logs(p.ctx(), p.box(), &out, "missing", 3, false); err == nil || !strings.Contains(err.Error(), `no program "missing"`) {
		t.Errorf("logs of a missing service: %v", err)
	}

	out.Reset()
	err = SSH(p.ctx(), p.box(), []string{"echo", "remote;", "exit", "7"}, strings.NewReader(""), &out, &out)
	if code, ok := err.(ExitStatus); !ok || code != 7 || !strings.Contains(out.String(), "remote") {
		t.Errorf("ssh exited %v (want status 7) %q", err, out.String())
	}

	var deleted []string
	calls, err = p.do(func(ctx context.Context, b *Box) (err error) { deleted, err = Destroy(ctx, b); return err })
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	boxtest.ExpectCalls(t, calls, []string{"machine ls --json", "machine status --name hermes-box --json",
		"machine stop --name hermes-box", "machine delete --name hermes-box --force", "machine ls --json"})
	if len(p.Machines()) != 0 || len(deleted) == 0 {
		t.Errorf("machines left: %v; deleted %v", p.Machines(), deleted)
	}
	if _, err := keys.LoadHostKey(filepath.Join(p.Root, "state"), boxtest.Machine); err == nil {
		t.Errorf("the pinned host key was kept")
	}
}

// inspect is the box's status.
func (p *project) inspect() *Status {
	p.t.Helper()
	st, err := Inspect(p.ctx(), p.box())
	if err != nil {
		p.t.Fatalf("status: %v", err)
	}
	return st
}

// TestOperationLock holds the operation lock: every verb that changes the
// box refuses before any smolvm call and reaps nothing; once the lock is
// free, the next verb reaps the partial artifacts a dead init left (only
// those whose name is a pid's).
func TestOperationLock(t *testing.T) {
	p := newProject(t)
	stale := filepath.Join(p.Root, "images", "hermes-base.tmp-4242.smolmachine")
	keep := filepath.Join(p.Root, "images", "hermes-base.tmp-x.smolmachine")
	p.Write("images/hermes-base.tmp-4242.smolmachine", "partial")
	p.Write("images/hermes-base.tmp-x.smolmachine", "not ours")
	boxtest.Must(t, os.MkdirAll(filepath.Join(p.Root, "state"), 0o700))
	lf, err := os.OpenFile(filepath.Join(p.Root, "state", "operation.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	boxtest.Must(t, err)
	boxtest.Must(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	verbs := map[string]func(context.Context, *Box) error{
		"init": func(ctx context.Context, b *Box) error { return Init(ctx, b, nil) }, "start": Start, "stop": Stop, "restart": Restart,
		"destroy": func(ctx context.Context, b *Box) error { _, err := Destroy(ctx, b); return err },
		"locked":  func(_ context.Context, b *Box) error { return Locked(b, func() error { return nil }) },
		// A verification may set chunks aside: it writes the store.
		"backups --verify":    func(ctx context.Context, b *Box) error { _, err := ListBackups(ctx, b, true, false); return err },
		"backups --read-data": func(ctx context.Context, b *Box) error { _, err := ListBackups(ctx, b, false, true); return err },
	}
	for name, verb := range verbs {
		calls, err := p.do(verb)
		if err == nil || userr.Code(err) != 1 || !strings.Contains(err.Error(), "another hermes-box operation is in progress") {
			t.Errorf("%s under a held lock: %v", name, err)
		}
		if len(calls) != 0 {
			t.Errorf("%s called smolvm under a held lock: %v", name, boxtest.Lines(calls))
		}
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("a stale artifact was reaped without the lock: %v", err)
	}
	// A plain listing only reads: it takes no lock.
	if _, err := p.do(func(ctx context.Context, b *Box) error { _, err := ListBackups(ctx, b, false, false); return err }); err != nil {
		t.Errorf("backups under a held lock: %v", err)
	}
	lf.Close()
	if _, err := p.do(Stop); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("stop without a box: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale artifact was not reaped: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file that only looks stale was removed: %v", err)
	}
	// The holder file goes with the lock: left behind, its pid could be
	// another process's later and status would say busy.
	if _, err := os.Stat(filepath.Join(p.Root, "state", filenames.OperationHolder)); !os.IsNotExist(err) {
		t.Errorf("the operation's holder file outlived its lock: %v", err)
	}
}
