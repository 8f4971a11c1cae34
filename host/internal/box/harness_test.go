package box

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// TestMain names the test hooks as the hbxtest tag does in the binaries
// the tests build (testhooks_hbxtest.go): these tests run the verbs
// in-process, on a boxtest project.
func TestMain(m *testing.M) {
	hooks.sshUser, hooks.relayCommand, hooks.host, hooks.timing = "HBX_TEST_SSH_USER", "HBX_TEST_RELAY_COMMAND", "HBX_TEST_HOST", "HBX_TEST_TIMING"
	hooks.agentPins, hooks.guestPins = "HBX_TEST_AGENT_PINS", "HERMES_BOX_AGENT_TEST_ONLY_PINS"
	hooks.netprobePlan, hooks.netcheckHost, hooks.lanGateway = "HBX_TEST_NETPROBE_PLAN", "HBX_TEST_NETCHECK_HOST", "HBX_TEST_LAN_GATEWAY"
	os.Exit(boxtest.Main(m))
}

// recordingUI is a UI that keeps what the verbs render, one line each.
type recordingUI struct {
	mu    sync.Mutex
	lines []string
}

func (u *recordingUI) add(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lines = append(u.lines, fmt.Sprintf(format, args...))
}

func (u *recordingUI) Event(ev protocol.Event) {
	u.add("event %s %s %s %s", ev.Type, ev.Step, ev.State, ev.Message)
}

func (u *recordingUI) Step(name, msg string) func(err error) {
	u.add("step %s: %s", name, msg)
	return func(err error) { u.add("step %s ended: %v", name, err) }
}

func (u *recordingUI) Info(format string, args ...any) { u.add("info "+format, args...) }
func (u *recordingUI) Warn(format string, args ...any) { u.add("warn "+format, args...) }

// text is everything rendered so far.
func (u *recordingUI) text() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.lines, "\n")
}

// project is a boxtest project whose environment this process has, and
// the Box of it.
type project struct {
	*boxtest.Project
	t  *testing.T
	ui *recordingUI
}

// newProject stands up a project (hermes-box.conf holding conf) for
// in-process verbs; its variables stay set until the test ends.
func newProject(t *testing.T, conf ...string) *project {
	t.Helper()
	p := &project{Project: boxtest.New(t, conf...), t: t, ui: &recordingUI{}}
	p.Setenv(t)
	return p
}

// box loads the project's Box afresh, as each command of hermes-box does.
func (p *project) box() *Box {
	p.t.Helper()
	b, err := Load(p.ui)
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

// ctx bounds one verb.
func (p *project) ctx() context.Context {
	ctx, cancel := context.WithTimeout(p.t.Context(), 2*time.Minute)
	p.t.Cleanup(cancel)
	return ctx
}

// do runs one verb and returns the smolvm calls it made.
func (p *project) do(fn func(ctx context.Context, b *Box) error) ([]boxtest.Call, error) {
	p.t.Helper()
	before := len(p.Calls())
	err := fn(p.ctx(), p.box())
	return p.Calls()[before:], err
}

// initBox runs a successful init and checks its whole conversation.
func (p *project) initBox() {
	p.t.Helper()
	calls, err := p.do(func(ctx context.Context, b *Box) error { return Init(ctx, b, nil) })
	if err != nil {
		p.t.Fatalf("init: %v\n%s\nsshd:\n%s", err, p.ui.text(), p.SSHD.Log)
	}
	want := p.InitCalls()
	if slices.Index(boxtest.Lines(calls), "machine create --help") < 0 {
		want = slices.DeleteFunc(want, func(l string) bool { return strings.HasSuffix(l, " --help") })
	}
	boxtest.ExpectCalls(p.t, calls, want)
	p.expectPlan(nil)
}

// expectPlan wants the steps rendered so far to be init's plan for docs.
func (p *project) expectPlan(docs []string) {
	p.t.Helper()
	var steps []string
	for _, l := range strings.Split(p.ui.text(), "\n") {
		if name, ok := strings.CutPrefix(l, "step "); ok && !strings.Contains(name, " ended: ") {
			steps = append(steps, strings.SplitN(name, ":", 2)[0])
		}
	}
	if plan := InitPlan(p.box(), docs); !slices.Equal(steps, plan) {
		p.t.Errorf("init's steps %v, its plan %v", steps, plan)
	}
}
