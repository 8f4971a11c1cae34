package cli_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestNextStepsOfABox: init on a box that exists, and a destroy declined
// at its prompt, each end with a next step of their own, not the catch-all
// "again with --debug" (which prints nothing new for them).
func TestNextStepsOfABox(t *testing.T) {
	t.Parallel()
	needScript(t)
	h := newHarness(t)
	initBox(t, h)
	expectFailure(t, "init of an existing box", h.run("init"), 1,
		[]string{`machine "hermes-box" already exists`, "next: the box exists already: hermes-box start starts it", "hermes-box snapshot"}, "--debug")
	code, out := h.runTTYInput("n\n", "destroy")
	if code != 1 || !strings.Contains(out, "destroy declined: nothing destroyed") || !strings.Contains(out, "next: nothing: the box is as it was") ||
		strings.Contains(out, "--debug") {
		t.Errorf("a declined destroy: exit %d\n%s", code, out)
	}
	if got := h.Machines()[boxtest.Machine]; got != "running" {
		t.Errorf("after the declined destroy the box is %q", got)
	}

	// restore takes a label, or latest, as well as a name or path.
	nightly := strings.TrimSpace(mustRun(t, h, "snapshot", "nightly").stdout)
	if r := h.run("restore", "nosuch"); r.code == 0 || !strings.Contains(r.stderr, "no backup named nosuch") {
		t.Errorf("restore of no backup: exit %d\n%s", r.code, r.stderr)
	}
	r := mustRun(t, h, "restore", "latest")
	if !strings.Contains(r.stdout, "restored hermes-box from "+nightly) || !strings.Contains(r.stderr, "latest is "+filepath.Base(nightly)) {
		t.Errorf("restore latest did not restore %s:\n%s%s", nightly, r.stdout, r.stderr)
	}
	expectHealthy(t, h, "after restore latest")

	// --yes is destroy's "do not ask", as it is hostkey repin's.
	if r := h.run("destroy", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "destroyed hermes-box") || len(h.Machines()) != 0 {
		t.Errorf("destroy --yes: exit %d, machines %v\n%s%s", r.code, h.Machines(), r.stdout, r.stderr)
	}
}

// runTTYInput is runTTY with input typed on the terminal.
func (h *harness) runTTYInput(input string, args ...string) (int, string) {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quoted := []string{"exec", shellQuote(bins.hermesBox)}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	record := filepath.Join(h.T.TempDir(), "typescript")
	cmd := exec.CommandContext(ctx, "script", "-q", "-e", "-c", strings.Join(quoted, " "), record)
	cmd.Env = append(append([]string(nil), h.Env...), h.Extra...)
	cmd.Stdin = strings.NewReader(input)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.T.Fatalf("script: %v", err)
	}
	return code, string(boxtest.ReadFile(h.T, record))
}
