package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// fakeBox answers one verb the way the agent's relay does.
type fakeBox struct {
	got    []string
	stdout string
	events []protocol.Event
	code   int
	err    error
}

func (f *fakeBox) Run(_ context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	if err := req.Validate(); err != nil {
		return -1, err
	}
	f.got = req.Argv
	if stdin != nil {
		return -1, errors.New("audit sent stdin")
	}
	io.WriteString(stdout, f.stdout)
	for _, ev := range f.events {
		onEvent(ev)
	}
	return f.code, f.err
}

func runAudit(t *testing.T, box *fakeBox, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCommand()
	for _, c := range root.Commands() {
		if c.Name() == "audit" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newAuditCommand(func(*cobra.Command) (relay.Transport, error) {
		if box == nil {
			return nil, errors.New("no box")
		}
		return box, nil
	}))
	var out, errb bytes.Buffer
	root.SetArgs(append([]string{"audit"}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	code := 0
	var st ExitCoder
	switch {
	case errors.As(err, &st):
		code = st.ExitCode()
	case err != nil:
		code = 1
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

func TestAuditCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		box      *fakeBox
		argv     string
		code     int
		out, err string
	}{
		{"show", nil, &fakeBox{stdout: "   1 ... approve\n"}, "audit show", 0, "approve", ""},
		{"show json", []string{"--json"}, &fakeBox{stdout: `{"ok":true}` + "\n"}, "audit show --json", 0, `{"ok":true}`, ""},
		{"verify intact", []string{"--verify"}, &fakeBox{stdout: "chain intact\n"}, "audit verify", 0, "intact", ""},
		{"verify tampered", []string{"--verify", "--json"}, &fakeBox{
			stdout: `{"ok":false,"broken":{"line":3}}` + "\n", code: 1,
			events: []protocol.Event{{Type: protocol.EventLog, Level: protocol.LevelError, Message: "audit chain broken at line 3"}},
		}, "audit verify --json", 1, `"line":3`, "box: audit chain broken at line 3"},
		{"relay fails", nil, &fakeBox{err: errors.New("host key does not match")}, "audit show", 1, "", "host key does not match"},
		{"no box", nil, nil, "", 1, "", "no box"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runAudit(t, tt.box, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errs, tt.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if tt.box != nil && strings.Join(tt.box.got, " ") != tt.argv {
				t.Fatalf("argv %q, want %q", tt.box.got, tt.argv)
			}
		})
	}
	if code, _, _ := runAudit(t, &fakeBox{}, "extra"); code != 1 {
		t.Fatal("extra argument accepted")
	}
}

// TestAuditOutsideAProjectSaysSo: the default runner needs the project's
// configuration before it can reach the box.
func TestAuditOutsideAProjectSaysSo(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("HERMES_BOX_PROJECT_ROOT", "")
	code, _, errs := runCLI(t, "audit", "--verify")
	if code != 1 || !strings.Contains(errs, "could not find the hermes-box project") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
