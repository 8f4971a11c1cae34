package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/shared/health"
)

const gateLog = "/workspace/hermes-home/logs/gate-audit.jsonl"

// auditStatus is status's audit-chain check.
func auditStatus(t *testing.T, h *harness) health.Check {
	t.Helper()
	r := h.run("status", "--json")
	rep, err := health.Decode([]byte(r.stdout))
	if err != nil {
		t.Fatalf("status --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep.Checks["audit-chain"]
}

// TestAuditAnchorHoldsHoweverTheStreamEnds: a log rewritten with fresh
// hashes is critical in `audit --verify` and in status when the agent
// sends it and then exits 1, and when it pads it far past 16 MiB; the
// anchor stays where it was.
func TestAuditAnchorHoldsHoweverTheStreamEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.GuestExec(boxtest.Machine, auditChain("deny", "deny", "approve"), "/usr/bin/tee", gateLog)
	mustRun(t, h, "audit")
	h.GuestExec(boxtest.Machine, auditChain("approve", "deny", "approve"), "/usr/bin/tee", gateLog)
	for _, c := range []string{"then-exit-1", "then-pad"} {
		t.Run(c, func(t *testing.T) {
			h.T = t
			h.hostile("audit", c)
			defer h.peaceful()
			r := h.run("audit", "--verify")
			if r.code != 1 || !strings.Contains(r.stdout, "BROKEN at line 3") {
				t.Errorf("audit --verify: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			logRSS(t, c+" on audit --verify", r)
			if c := auditStatus(t, h); c.Status != health.StatusUnhealthy || c.Severity != health.SeverityCritical || !strings.Contains(c.Message, "line 3") {
				t.Errorf("status's audit check %+v, want critical at line 3", c)
			}
		})
	}
	h.T = t
	// The original log still extends the anchor: it never moved.
	h.GuestExec(boxtest.Machine, auditChain("deny", "deny", "approve"), "/usr/bin/tee", gateLog)
	mustRun(t, h, "audit", "--verify")
}

// TestAuditAnchorTravelsWithBackups: restoring one's own older backup
// installs the anchor it carries, destroy moves the anchor aside (and
// says so), so neither leaves a false alarm; `audit --reset-anchor` is
// explicit and logged.
func TestAuditAnchorTravelsWithBackups(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.GuestExec(boxtest.Machine, auditChain("deny", "deny", "approve"), "/usr/bin/tee", gateLog)
	older := strings.TrimSpace(mustRun(t, h, "snapshot", "older").stdout)
	// An incremental backup (the default): its signed record carries the
	// anchor, as a v2 manifest does.
	var rec chunkstore.Record
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(older, chunkstore.RecordFile)), &rec))
	if !strings.HasPrefix(rec.AuditAnchor, `{"count":3,`) {
		t.Errorf("the backup's record carries no anchor of 3 lines: %q", rec.AuditAnchor)
	}
	h.GuestExec(boxtest.Machine, auditChain("deny", "deny", "approve", "deny", "deny"), "/usr/bin/tee", gateLog)
	mustRun(t, h, "audit") // anchored at 5 lines

	r := mustRun(t, h, "restore", older)
	if !strings.Contains(r.stderr, "installed the backup's audit anchor (3 lines)") {
		t.Errorf("restore does not say it installed the anchor:\n%s", r.stderr)
	}
	if r := h.run("audit", "--verify"); r.code != 0 {
		t.Errorf("audit --verify after restoring an older backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if c := auditStatus(t, h); c.Status != health.StatusHealthy {
		t.Errorf("status's audit check after the restore: %+v", c)
	}

	r = mustRun(t, h, "destroy", "--force")
	if !strings.Contains(r.stderr, "moved the audit anchor of the deleted box aside to ") {
		t.Errorf("destroy does not say it moved the anchor aside:\n%s", r.stderr)
	}
	initBox(t, h)
	if r := h.run("audit", "--verify"); r.code != 0 || !strings.Contains(r.stdout, "0 entries") {
		t.Errorf("audit --verify of the new box: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A break dealt with: the user resets the anchor, on the record.
	h.GuestExec(boxtest.Machine, auditChain("deny", "approve"), "/usr/bin/tee", gateLog)
	mustRun(t, h, "audit")
	h.GuestExec(boxtest.Machine, auditChain("approve", "approve"), "/usr/bin/tee", gateLog)
	if r := h.run("audit", "--verify"); r.code != 1 {
		t.Fatalf("audit --verify of a rewritten log: exit %d", r.code)
	}
	r = mustRun(t, h, "audit", "--verify", "--reset-anchor")
	if !strings.Contains(r.stderr, "audit anchor reset") {
		t.Errorf("--reset-anchor does not say so:\n%s", r.stderr)
	}
	logged := string(boxtest.ReadFile(t, filepath.Join(h.Root, "state", "audit-anchor-resets.log")))
	if !strings.Contains(logged, "reset the audit anchor of 2 lines") {
		t.Errorf("the reset log: %q", logged)
	}
	if moved, _ := filepath.Glob(filepath.Join(h.Root, "state", "audit-anchor.json.[0-9]*")); len(moved) != 2 {
		t.Errorf("anchors moved aside: %v", moved)
	}
	if _, err := os.Stat(filepath.Join(h.Root, "state", "audit-anchor.json")); err != nil {
		t.Errorf("no anchor after the reset's check: %v", err)
	}
	mustRun(t, h, "stop")
}
