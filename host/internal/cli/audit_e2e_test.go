package cli_test

import (
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestAuditThroughTheRelay runs `hermes-box audit` against the box: the
// real agent's verb answers over the SSH relay, and a tampered log fails
// --verify with the line number.
func TestAuditThroughTheRelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	r := mustRun(t, h, "audit", "--json")
	if !strings.Contains(r.stdout, `"ok":true`) || !strings.Contains(r.stdout, `"entries":0`) {
		t.Errorf("audit --json of an empty log: %s", r.stdout)
	}
	h.GuestExec(boxtest.Machine, "{\"not\":\"a record\"}\n", "/usr/bin/tee", "/workspace/hermes-home/logs/gate-audit.jsonl")
	r = h.run("audit", "--verify")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "line 1") {
		t.Errorf("audit --verify of a tampered log exited %d:\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	mustRun(t, h, "stop")
	if r = h.run("audit"); r.code == 0 || !strings.Contains(r.stderr, "is stopped") {
		t.Errorf("audit of a stopped box: %d %s", r.code, r.stderr)
	}
}
