package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// TestUpgradeKeepsTheWorkspace: a configuration asking for another Hermes
// commit is named by status with the upgrade path; that path (snapshot,
// destroy, init, restore --workspace-only) brings the workspace back onto
// the new base image without what the old box had outside the workspace,
// and a plain restore of the same backup brings that back (issue 40,
// item 5). The fake builds only the pinned commit, so the box is rebuilt
// with it; its image carries no workspace seed, so TestApplyWorkspaceOnly
// holds the agent's seed record.
func TestUpgradeKeepsTheWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	root := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	marker := filepath.Join(root, "opt", "installed-outside-the-workspace")
	boxtest.Must(t, os.MkdirAll(filepath.Dir(marker), 0o755))
	boxtest.Must(t, os.WriteFile(marker, []byte("old root\n"), 0o644))
	h.WriteNote("kept\n")
	// Hermes' own files are in the workspace too: a new image's first boot
	// must not seed them over.
	memory := filepath.Join(root, "workspace", "hermes-home", "memory-kept.txt")
	boxtest.Must(t, os.WriteFile(memory, []byte("remembered\n"), 0o600))
	mustRun(t, h, "snapshot", "before-upgrade")

	const older = "81eaedd0f5c471c7ee748990066135a684f3c962" // 0.16.0
	h.Extra = []string{"HERMES_BOX_HERMES_COMMIT=" + older}
	r := h.run("status")
	for _, w := range []string{
		"HERMES_BOX_HERMES_COMMIT is " + older + " (Hermes 0.16.0) in the configuration, but the box runs " + pins.DefaultHermesCommit + " (Hermes 0.19.0)",
		"hermes-box destroy --force, hermes-box init (which builds the image with it), then hermes-box restore before-upgrade --workspace-only",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status with another Hermes commit configured does not say %q:\n%s%s", w, r.stdout, r.stderr)
		}
	}
	h.Extra = nil

	mustRun(t, h, "destroy", "--force")
	initBox(t, h)
	r = mustRun(t, h, "restore", "before-upgrade", "--workspace-only")
	if !strings.Contains(r.stderr, "the root file system is the current base image's") || !strings.Contains(r.stderr, "the restored box runs Hermes 0.19.0") ||
		!strings.HasPrefix(r.stdout, "restored the workspace of hermes-box from ") {
		t.Errorf("the workspace-only restore does not say what it restores:\n%s%s", r.stdout, r.stderr)
	}
	if got := h.ReadNote(); got != "kept\n" {
		t.Errorf("the workspace's note after the upgrade: %q", got)
	}
	if b, err := os.ReadFile(memory); err != nil || string(b) != "remembered\n" {
		t.Errorf("Hermes' file in the workspace after the upgrade: %q %v", b, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the workspace-only restore brought back the old root file system's file")
	}
	r = h.run("status")
	if r.code != 0 || !strings.Contains(r.stdout, "healthy") || strings.Contains(r.stdout, "settings") {
		t.Errorf("status after the upgrade: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A plain restore brings the backup's root file system back, and the
	// box's record names the Hermes it then runs (its health check's), not
	// what the box had before: here a record saying 0.16.0, as a box built
	// with it would have.
	settings := filepath.Join(h.Root, "state", "box-settings.json")
	rec := boxtest.ReadFile(t, settings)
	boxtest.Must(t, os.WriteFile(settings, []byte(strings.Replace(string(rec), pins.DefaultHermesCommit, older, 1)), 0o600))
	if r = h.run("status"); !strings.Contains(r.stdout, "HERMES_BOX_HERMES_COMMIT is "+pins.DefaultHermesCommit) {
		t.Errorf("status does not name the commit the record says the box runs:\n%s", r.stdout)
	}
	mustRun(t, h, "restore", "before-upgrade")
	if b, err := os.ReadFile(marker); err != nil || string(b) != "old root\n" {
		t.Errorf("a full restore did not bring the root file system's file back: %q %v", b, err)
	}
	if r = h.run("status"); r.code != 0 || strings.Contains(r.stdout, "settings") {
		t.Errorf("status after the full restore: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustRun(t, h, "stop")
}
