package box

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
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
	boxtest.ExpectCalls(t, calls, append(append(status, "machine stop --name hermes-box"), append(append(status, "--version"), boxtest.Started(boxtest.Machine)...)...))

	st := p.inspect()
	if st.Box.State != string(health.StatusHealthy) || st.Status != health.StatusHealthy || st.Agent.Version == "" {
		t.Errorf("running box: state %q report %+v", st.State, st.Report)
	}
	services, err := Services(p.ctx(), p.box())
	if err != nil || strings.Join(services, ",") != "sshd,hermes" {
		t.Errorf("services %v (%v), want sshd and hermes", services, err)
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
