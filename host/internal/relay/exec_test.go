package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// localExecer stands in for `smolvm machine exec`: it checks the argv the
// driver would pass and runs the real agent here, on a temp root.
type localExecer struct {
	t     *testing.T
	agent string
	root  string
	argv  []string
}

func (l *localExecer) Exec(ctx context.Context, s smolvm.ExecSpec) (smolvm.Result, error) {
	args, err := s.Args()
	if err != nil {
		return smolvm.Result{}, err
	}
	l.argv = args
	cmd := exec.CommandContext(ctx, l.agent, append([]string{"--root", l.root}, s.Argv[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.Env = append(os.Environ(), s.Env...)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return smolvm.Result{ExitCode: ee.ExitCode()}, nil
	}
	return smolvm.Result{}, err
}

func TestExecTransport(t *testing.T) {
	dir := t.TempDir()
	l := &localExecer{t: t, agent: sshdtest.BuildAgent(t, dir), root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(filepath.Join(l.root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr := &Exec{Machine: "builder", Execer: l}

	var out bytes.Buffer
	code, err := tr.Run(t.Context(), request("health", "--json"), nil, &out, nil)
	if err != nil || code != 0 {
		t.Fatalf("health: %d %v", code, err)
	}
	if _, err := health.Decode(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	want := "machine exec --stream -i --name builder -- /usr/local/sbin/hermes-box-agent relay"
	if got := strings.Join(l.argv, " "); got != want {
		t.Errorf("argv %q, want %q", got, want)
	}

	// hostkeys is not a relay verb: the agent refuses it with status 2 and
	// says why in an event.
	var events []protocol.Event
	code, err = tr.Run(t.Context(), request("hostkeys"), nil, nil, func(ev protocol.Event) { events = append(events, ev) })
	if err != nil || code != 2 {
		t.Fatalf("hostkeys through relay: %d %v", code, err)
	}
	if len(events) == 0 || !strings.Contains(events[len(events)-1].Message, "not allowed through the relay") {
		t.Errorf("events %+v", events)
	}

	if _, err := tr.Run(t.Context(), protocol.Request{ProtocolVersion: 99, Argv: []string{"health"}}, nil, nil, nil); err == nil {
		t.Error("a bad request was sent")
	}
}

// TestExecTransportDirect: a direct verb runs as `agent VERB ARGS…` with the
// transport's environment, which is how provision (refused through the
// relay) runs in the builder and how the test-only pins reach it.
func TestExecTransportDirect(t *testing.T) {
	dir := t.TempDir()
	l := &localExecer{t: t, agent: sshdtest.BuildAgent(t, dir), root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(l.root, 0o755); err != nil {
		t.Fatal(err)
	}
	env := "HERMES_BOX_AGENT_TEST_ONLY_PINS=" + filepath.Join(dir, "missing-pins.json")
	req := request("provision", "--dry-run", "--arch", "arm64")

	relayed := &Exec{Machine: "builder", Execer: l, Env: []string{env}}
	var events []protocol.Event
	code, err := relayed.Run(t.Context(), req, nil, nil, func(ev protocol.Event) { events = append(events, ev) })
	if err != nil || code != 2 || len(events) == 0 || !strings.Contains(events[len(events)-1].Message, "not allowed through the relay") {
		t.Fatalf("provision through the relay: %d %v %+v; want it refused with status 2", code, err, events)
	}

	direct := &Exec{Machine: "builder", Execer: l, Direct: true, Env: []string{env}}
	events = nil
	code, err = direct.Run(t.Context(), req, nil, nil, func(ev protocol.Event) { events = append(events, ev) })
	if err != nil || code != 1 {
		t.Fatalf("direct provision with unreadable test pins: %d %v; want status 1", code, err)
	}
	want := "machine exec --stream --name builder -e " + env + " -- /usr/local/sbin/hermes-box-agent provision --dry-run --arch arm64"
	if got := strings.Join(l.argv, " "); got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	var warned, failed bool
	for _, ev := range events {
		warned = warned || (ev.Type == protocol.EventWarning && strings.Contains(ev.Message, "HERMES_BOX_AGENT_TEST_ONLY_PINS is set"))
		failed = failed || strings.Contains(ev.Message, "reading test pins")
	}
	if !warned || !failed {
		t.Errorf("the environment did not reach the agent: events %+v", events)
	}

	// A timeout is smolvm's: it ends the verb in the box (netcheck's).
	timed := &Exec{Machine: "builder", Execer: l, Direct: true, Timeout: 5 * time.Second}
	if _, err := timed.Run(t.Context(), request("netcheck"), nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	want = "machine exec --stream --name builder --timeout 5s -- /usr/local/sbin/hermes-box-agent netcheck"
	if got := strings.Join(l.argv, " "); got != want {
		t.Errorf("argv %q, want %q", got, want)
	}

	if _, err := direct.Run(t.Context(), req, strings.NewReader("x"), nil, nil); err == nil {
		t.Error("a direct verb was given input")
	}
	if _, err := direct.Run(t.Context(), protocol.Request{ProtocolVersion: 99, Argv: []string{"provision"}}, nil, nil, nil); err == nil {
		t.Error("a bad direct request ran")
	}
}

// TestExecTransportHoldOutput: where the release's exec -i is not safe with
// large input (HoldOutput), a call with input runs `agent relay
// --hold-output`; a call without input, or on a release without the
// quirk, runs `agent relay`. The agent answers both.
func TestExecTransportHoldOutput(t *testing.T) {
	dir := t.TempDir()
	l := &localExecer{t: t, agent: sshdtest.BuildAgent(t, dir), root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(filepath.Join(l.root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	const prefix = "machine exec --stream -i --name builder -- /usr/local/sbin/hermes-box-agent "
	tests := []struct {
		name  string
		hold  bool
		stdin bool
		want  string
	}{
		{"hold with input", true, true, "relay --hold-output"},
		{"hold without input", true, false, "relay"},
		{"no hold", false, true, "relay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Exec{Machine: "builder", Execer: l, HoldOutput: tt.hold}
			var stdin io.Reader
			if tt.stdin {
				stdin = strings.NewReader("not an apply stream\n")
			}
			var events []protocol.Event
			code, err := tr.Run(t.Context(), request("snapshot", "apply"), stdin, nil, func(ev protocol.Event) { events = append(events, ev) })
			if err != nil || code == 0 {
				t.Fatalf("snapshot apply of a bad stream: %d %v", code, err)
			}
			if len(events) == 0 || !strings.Contains(events[len(events)-1].Message, "apply stream") {
				t.Errorf("events %+v, want the apply's error", events)
			}
			if got := strings.Join(l.argv, " "); got != prefix+tt.want {
				t.Errorf("argv %q, want %q", got, prefix+tt.want)
			}
		})
	}
}

// stalledExecer answers as smolvm 1.0.4 does when a stdin write made no
// progress for 10 s.
type stalledExecer struct{}

func (stalledExecer) Exec(_ context.Context, s smolvm.ExecSpec) (smolvm.Result, error) {
	_, _ = io.WriteString(s.Stderr, "Error: io operation failed: Resource temporarily unavailable (os error 11)\n")
	return smolvm.Result{ExitCode: 1}, nil
}

// TestExecStalledInput: smolvm's EAGAIN on a call with input (only a
// release without LargeExecStdin prints it) becomes errStalledInput, which
// says what happened and what to install, held output or not; a call
// without input gets smolvm's status 1 as it is.
func TestExecStalledInput(t *testing.T) {
	for _, hold := range []bool{true, false} {
		tr := &Exec{Machine: "box", Execer: stalledExecer{}, HoldOutput: hold}
		_, err := tr.Run(t.Context(), request("snapshot", "apply"), strings.NewReader("x"), nil, nil)
		if !errors.Is(err, errStalledInput) || !strings.Contains(err.Error(), "1.8.1") || !strings.Contains(err.Error(), pins.SmolvmInstallCommand(pins.SmolvmRecommended)) {
			t.Fatalf("HoldOutput %v: error %v, want errStalledInput naming the fix and the install command", hold, err)
		}
	}
	tr := &Exec{Machine: "box", Execer: stalledExecer{}}
	if code, err := tr.Run(t.Context(), request("health"), nil, nil, nil); code != 1 || err != nil {
		t.Fatalf("without input: %d %v, want 1 and no error", code, err)
	}
}
