package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
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

func runAudit(t *testing.T, box *fakeBox, anchor string, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCommand()
	for _, c := range root.Commands() {
		if c.Name() == "audit" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newAuditCommand(func(*cobra.Command) (auditTarget, error) {
		if box == nil {
			return auditTarget{}, errors.New("no box")
		}
		return auditTarget{box: agent.New(box, nil), anchor: anchor}, nil
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

// chainOf is a valid audit log of the given decisions.
func chainOf(decisions ...string) string {
	return auditchaintest.Decisions("ls %d", "low", decisions...)
}

// TestAuditCommand: the host reads the raw log (audit raw), verifies it and
// checks it against its anchor, whatever the agent would have said.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		box      *fakeBox
		code     int
		out, err string
	}{
		{"show", nil, &fakeBox{stdout: chainOf("approve")}, 0, "approve", ""},
		{"show json", []string{"--json"}, &fakeBox{stdout: chainOf("deny")}, 0, `"ok":true,"entries":1`, ""},
		{"verify intact", []string{"--verify"}, &fakeBox{stdout: chainOf("deny", "deny")}, 0, "2 entries, chain intact", ""},
		{"verify tampered", []string{"--verify", "--json"}, &fakeBox{stdout: strings.Replace(chainOf("deny", "deny", "deny"), `"decision":"deny","prev":"`+"", `"decision":"approve","prev":"`, 1)},
			1, `"line":1`, "the audit chain does not hold"},
		{"empty log", nil, &fakeBox{}, 0, "0 entries", ""},
		{"agent fails", nil, &fakeBox{code: 3}, 3, "", ""},
		{"relay fails", nil, &fakeBox{err: errors.New("host key does not match")}, 1, "", "host key does not match"},
		{"no box", nil, nil, 1, "", "no box"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runAudit(t, tt.box, filepath.Join(t.TempDir(), "anchor.json"), tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errs, tt.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if tt.box != nil && strings.Join(tt.box.got, " ") != "audit raw" {
				t.Fatalf("argv %q, want audit raw", tt.box.got)
			}
		})
	}
	if code, _, _ := runAudit(t, &fakeBox{}, filepath.Join(t.TempDir(), "a"), "extra"); code != 1 {
		t.Fatal("extra argument accepted")
	}
}

// TestAuditAnchored: a log the box rewrote whole (every hash recomputed)
// verifies in itself but not against what the host saw.
func TestAuditAnchored(t *testing.T) {
	t.Parallel()
	anchor := filepath.Join(t.TempDir(), "anchor.json")
	if code, _, errs := runAudit(t, &fakeBox{stdout: chainOf("deny", "deny")}, anchor); code != 0 {
		t.Fatalf("first audit: %d %s", code, errs)
	}
	code, out, errs := runAudit(t, &fakeBox{stdout: chainOf("deny", "approve")}, anchor, "--verify")
	// The verdict once, on stdout; stderr says only that it failed.
	if code != 1 || !strings.Contains(out, "BROKEN at line 2") || !strings.Contains(out, "rewritten") ||
		strings.Contains(errs, "rewritten") || !strings.Contains(errs, "the audit chain does not hold") {
		t.Fatalf("rewritten log: exit %d\n%s\n%s", code, out, errs)
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
