package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/shared/health"
)

// expectHealthy checks that the box runs and its services are RUNNING.
func expectHealthy(t *testing.T, h *harness, when string) {
	t.Helper()
	st := statusJSON(t, h)
	if st.state != "running" || st.report.Status != health.StatusHealthy || len(st.report.Services) != 2 {
		t.Fatalf("%s: state %q report %+v", when, st.state, st.report)
	}
}

func mustRun(t *testing.T, h *harness, args ...string) result {
	t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		t.Fatalf("hermes-box %v exited %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// TestSnapshotRestorePackage runs the backup commands end to end through
// the real binary, the fake smolvm and the real agent: snapshot, restore
// onto the existing box (safety snapshot, candidate, cut-over), restore
// onto no box, and both forms of package.
func TestSnapshotRestorePackage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.WriteNote("before\n")

	r := mustRun(t, h, "snapshot", "first")
	backupDir := strings.TrimSpace(r.stdout)
	// Incremental, the default: a signed record naming chunks in the store.
	for _, f := range []string{chunkstore.RecordFile, chunkstore.RecordSignature} {
		if _, err := os.Stat(filepath.Join(backupDir, f)); err != nil {
			t.Fatalf("backup %q lacks %s: %v", backupDir, f, err)
		}
	}
	if i := boxtest.Index(r.calls, `^machine (create|stop|start|delete)`); i >= 0 {
		t.Errorf("snapshot of a running box changed the machine: %s", r.calls[i].Line)
	}
	expectHealthy(t, h, "after snapshot")

	// Replacement path.
	h.WriteNote("after\n")
	r = mustRun(t, h, "restore", backupDir)
	if got := h.ReadNote(); got != "before\n" {
		t.Fatalf("note after restore = %q, want the backup's", got)
	}
	h.CheckReplacement(r.calls)
	expectHealthy(t, h, "after the replacement restore")
	safety, _ := filepath.Glob(filepath.Join(h.Root, "backups", "hermes-box-*-pre-restore.hermesbox"))
	if len(safety) != 1 {
		t.Errorf("safety snapshots: %v", safety)
	}

	// Fresh path.
	mustRun(t, h, "destroy", "--force")
	r = mustRun(t, h, "restore", backupDir)
	if got := h.ReadNote(); got != "before\n" {
		t.Fatalf("note after the fresh restore = %q", got)
	}
	if i := boxtest.Index(r.calls, `-restore-`); i >= 0 {
		t.Errorf("the fresh restore made a candidate: %s", r.calls[i].Line)
	}
	wantCreate := fmt.Sprintf(`^machine create --name hermes-box --from \$ROOT/images/hermes-base\.smolmachine .*-p %d:22 .*-e HERMES_BOX_RESTORE_MODE=true --net$`, h.Port)
	if boxtest.Index(r.calls, wantCreate) < 0 {
		t.Errorf("no restore-mode create of the box:\n  %s", strings.Join(boxtest.Lines(r.calls), "\n  "))
	}
	expectHealthy(t, h, "after the fresh restore")
	// The machine's -e variables reach its entrypoint (the agent's boot).
	var rec struct {
		EntryPID int `json:"entry_pid"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "machine.json")), &rec))
	environ := boxtest.ReadFile(t, fmt.Sprintf("/proc/%d/environ", rec.EntryPID))
	if !bytes.Contains(environ, []byte("\x00HERMES_BOX_RESTORE_MODE=true\x00")) {
		t.Errorf("the restored box's boot (pid %d) runs without HERMES_BOX_RESTORE_MODE=true", rec.EntryPID)
	}

	// Package a new snapshot, then the existing backup.
	for _, args := range [][]string{{"package", "moving"}, {"package", "--snapshot", backupDir, "again"}} {
		r = mustRun(t, h, args...)
		archive := strings.TrimSpace(r.stdout)
		if !strings.HasSuffix(archive, ".tar") || !strings.Contains(archive, args[len(args)-1]) {
			t.Fatalf("%v printed %q", args, archive)
		}
		for _, p := range []string{archive, archive + ".sha256"} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%v: %v", args, err)
			}
		}
	}
	expectHealthy(t, h, "after package")
}

// TestRestoreCandidateFailure fails the candidate's boot: the candidate is
// deleted, the original keeps its data and runs again.
func TestRestoreCandidateFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.WriteNote("before\n")
	backupDir := strings.TrimSpace(mustRun(t, h, "snapshot").stdout)
	h.WriteNote("after\n")

	starts := 0
	for _, c := range h.Calls() {
		if strings.HasPrefix(c.Line, "machine start ") {
			starts++
		}
	}
	h.Extra = []string{fmt.Sprintf("FAKESMOLVM_FAIL=machine start#%d", starts+1)}
	r := h.run("restore", backupDir)
	h.Extra = nil
	if r.code == 0 || !strings.Contains(r.stderr, "candidate failed, original kept") {
		t.Fatalf("restore with a failing candidate exited %d:\n%s", r.code, r.stderr)
	}
	cand := regexp.MustCompile(`^machine create --name (hermes-box-restore-[0-9-]+) `)
	var name string
	for _, c := range r.calls {
		if m := cand.FindStringSubmatch(c.Line); m != nil {
			name = m[1]
		}
	}
	if name == "" || boxtest.Index(r.calls, `^machine delete --name `+name+` --force$`) < 0 {
		t.Errorf("the candidate %q was not deleted:\n  %s", name, strings.Join(boxtest.Lines(r.calls), "\n  "))
	}
	if boxtest.Index(r.calls, `^machine delete --name hermes-box --force$`) >= 0 {
		t.Errorf("the original was deleted")
	}
	if got := h.ReadNote(); got != "after\n" {
		t.Errorf("the original's note is %q", got)
	}
	if got := h.Machines(); len(got) != 1 || got[boxtest.Machine] != "running" {
		t.Errorf("machines: %v", got)
	}
	expectHealthy(t, h, "after the failed restore")
}

// TestInterruptedRestoreBlocksOtherCommands stands in for a restore killed
// after the cut-over deleted the original box: the original is only in its
// safety snapshot and the journal names it. Every command that would touch
// the machines refuses, naming that backup, until `restore` of it brings
// the original back and clears the journal.
func TestInterruptedRestoreBlocksOtherCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.WriteNote("original\n")
	safety := strings.TrimSpace(mustRun(t, h, "snapshot", "pre-restore").stdout)
	h.WriteNote("later\n")
	other := strings.TrimSpace(mustRun(t, h, "snapshot", "other").stdout)
	mustRun(t, h, "destroy", "--force")
	journal := filepath.Join(h.Root, "state", "restore-journal")
	h.Write("state/restore-journal", "machine="+boxtest.Machine+"\nsafety="+safety+"\n")

	for _, args := range [][]string{
		{"start"}, {"stop"}, {"restart"}, {"destroy", "--force"}, {"init"}, {"ssh", "true"}, {"status"},
		{"snapshot", "x"}, {"package", "y"}, {"restore", other},
	} {
		r := h.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "interrupted restore") || !strings.Contains(r.stderr, "hermes-box restore "+safety) {
			t.Errorf("%v exited %d with stderr:\n%s", args, r.code, r.stderr)
		}
		if i := boxtest.Index(r.calls, `^machine (create|start|stop|delete)`); i >= 0 {
			t.Errorf("%v changed a machine: %s", args, r.calls[i].Line)
		}
	}
	h.Write("state/restore-journal", "machine="+boxtest.Machine+"\n")
	if r := h.run("start"); r.code == 0 || !strings.Contains(r.stderr, "inspect or remove "+journal) {
		t.Errorf("start with an unreadable journal exited %d with stderr:\n%s", r.code, r.stderr)
	}
	h.Write("state/restore-journal", "machine="+boxtest.Machine+"\nsafety="+safety+"\n")

	r := mustRun(t, h, "restore", safety)
	if !strings.Contains(r.stderr, "recovering the original machine") {
		t.Errorf("the recovering restore did not say so:\n%s", r.stderr)
	}
	if got := h.ReadNote(); got != "original\n" {
		t.Errorf("note after recovery = %q, want the original's", got)
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("the journal outlived the recovery: %v", err)
	}
	expectHealthy(t, h, "after the recovery")
	mustRun(t, h, "stop")
}

// TestRestoreDiscardCurrent: a compromised box whose own safety snapshot
// fails keeps the restore of a clean backup from replacing it; the error
// says so and offers --discard-current, which deletes the box once the
// backup is verified and staged and restores it as onto no box.
func TestRestoreDiscardCurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.WriteNote("clean\n")
	clean := strings.TrimSpace(mustRun(t, h, "snapshot", "clean").stdout)
	h.WriteNote("compromised\n")
	h.hostile("snapshot", "tar-names")
	r := h.run("restore", clean)
	if r.code == 0 || !strings.Contains(r.stderr, "the box's own safety snapshot failed") ||
		!strings.Contains(r.stderr, "hermes-box restore --discard-current "+clean) {
		t.Fatalf("restore with a failing safety snapshot exited %d:\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(r.calls, `^machine (create|delete)`); i >= 0 {
		t.Errorf("the refused restore changed the machines: %s", r.calls[i].Line)
	}
	if got := h.ReadNote(); got != "compromised\n" {
		t.Errorf("note = %q", got)
	}

	r = mustRun(t, h, "restore", "--discard-current", clean)
	if got := h.ReadNote(); got != "clean\n" {
		t.Errorf("note after --discard-current = %q", got)
	}
	deleted := boxtest.Index(r.calls, `^machine delete --name hermes-box --force$`)
	created := boxtest.Index(r.calls, `^machine create --name hermes-box --from .*-e HERMES_BOX_RESTORE_MODE=true --net$`)
	if deleted < 0 || created < deleted || boxtest.Index(r.calls, `-restore-`) >= 0 {
		t.Errorf("--discard-current: delete %d, create %d, no candidate:\n  %s", deleted, created, strings.Join(boxtest.Lines(r.calls), "\n  "))
	}
	expectHealthy(t, h, "after --discard-current")
	mustRun(t, h, "stop")
}
