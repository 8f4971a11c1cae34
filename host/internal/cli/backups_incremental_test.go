package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
)

// incrementalBackups makes a box, takes a v2 snapshot of it (h is made
// with v2Snapshots), and writes n
// incremental backups of the box's machine from that snapshot's parts,
// signed by the project key, a day apart (the newest a day before the v2
// one); it returns the v2 backup and the incremental ones, oldest first.
func incrementalBackups(t *testing.T, h *harness, n int) (string, []string) {
	t.Helper()
	initBox(t, h)
	h.WriteNote("incremental\n")
	v2 := strings.TrimSpace(mustRun(t, h, "snapshot", "base").stdout)
	signer, err := keys.LoadProjectKey(filepath.Join(h.Root, "state", "hermes-box-ed25519"))
	boxtest.Must(t, err)
	parts := map[string][]byte{}
	for _, part := range chunkstore.Parts {
		parts[part] = boxtest.ReadFile(t, filepath.Join(v2, part+".tar.gz"))
	}
	src := chunktest.Agent(parts, chunktest.Mutation{}, nil)
	var dirs []string
	for i := n; i >= 1; i-- {
		m := backup.Meta{Machine: boxtest.Machine, Label: fmt.Sprintf("inc%d", i), Smolvm: "test", GOOS: "linux", Signer: signer,
			Now: time.Now().AddDate(0, 0, -i)}
		dir, _, err := chunkstore.Ingest(t.Context(), filepath.Join(h.Root, "backups"), m, src, nil)
		boxtest.Must(t, err)
		dirs = append(dirs, dir)
	}
	return v2, dirs
}

func listBackups(t *testing.T, h *harness, args ...string) ([]backup.Entry, result) {
	t.Helper()
	r := h.run(append([]string{"backups", "--json"}, args...)...)
	var entries []backup.Entry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("backups --json %v: %v\n%s%s", args, err, r.stdout, r.stderr)
	}
	return entries, r
}

// TestBackupsRepairAndPruneIncremental runs the `backups` commands on
// incremental backups through the binary: the listing shows each one's
// own size and what it added; a store whose index was deleted fails
// --verify and is rebuilt by `backups repair`, after which every chunk
// re-hashes (--read-data); prune keeps what its policy keeps, v2 and
// incremental alike, and collects the chunks.
func TestBackupsRepairAndPruneIncremental(t *testing.T) {
	t.Parallel()
	h := newHarness(t, v2Snapshots)
	v2, inc := incrementalBackups(t, h, 3)

	entries, _ := listBackups(t, h)
	if len(entries) != 4 {
		t.Fatalf("listed %d backups, want 4: %+v", len(entries), entries)
	}
	for i, e := range entries {
		incremental := i < 3
		switch {
		case e.Incremental != incremental || !e.Good() || e.Size <= 0:
			t.Errorf("%s: %+v", e.Name, e)
		case incremental && (e.Added > 0) != (i == 0):
			t.Errorf("%s added %d bytes: only the first incremental backup adds chunks", e.Name, e.Added)
		case !incremental && e.Added != e.Size:
			t.Errorf("v2 %s: added %d, size %d", e.Name, e.Added, e.Size)
		}
	}
	table := mustRun(t, h, "backups").stdout
	if !strings.Contains(table, "ADDED") || !strings.Contains(table, "incremental, complete") {
		t.Errorf("backups table:\n%s", table)
	}

	// The store's index deleted: --verify names every incremental backup.
	index := filepath.Join(chunkstore.StoreDir(filepath.Join(h.Root, "backups"), boxtest.Machine), "index")
	idx, err := os.ReadDir(index)
	boxtest.Must(t, err)
	for _, f := range idx {
		boxtest.Must(t, os.Remove(filepath.Join(index, f.Name())))
	}
	r := h.run("backups", "--verify")
	if r.code != 1 || !strings.Contains(r.stderr, "3 of 4 backups are invalid") {
		t.Fatalf("backups --verify without the index: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = mustRun(t, h, "backups", "repair")
	if !strings.Contains(r.stdout, boxtest.Machine+": index rebuilt from ") || !strings.Contains(r.stdout, "3 incremental backups whole") {
		t.Errorf("repair said:\n%s", r.stdout)
	}
	entries, r = listBackups(t, h, "--read-data")
	for _, e := range entries {
		if e.Verified != backup.StateVerified {
			t.Errorf("after repair %s is %s: %s", e.Name, e.Verified, e.Problem)
		}
	}
	if r.code != 0 {
		t.Errorf("backups --read-data after repair exited %d: %s", r.code, r.stderr)
	}

	// keep-last 2: the v2 backup and the newest incremental one.
	r = mustRun(t, h, "backups", "prune", "--keep-last", "2", "--dry-run")
	if !strings.Contains(r.stdout, "would remove  "+filepath.Base(inc[0])) || !strings.Contains(r.stdout, "2 kept, 2 would remove") {
		t.Errorf("prune --dry-run said:\n%s", r.stdout)
	}
	r = mustRun(t, h, "backups", "prune", "--keep-last", "2")
	if !strings.Contains(r.stdout, "2 kept, 2 removed") || !strings.Contains(r.stdout, "chunk store: ") {
		t.Errorf("prune said:\n%s", r.stdout)
	}
	entries, _ = listBackups(t, h, "--read-data")
	if len(entries) != 2 || entries[0].Path != inc[2] || entries[1].Path != v2 {
		t.Errorf("after prune: %+v", entries)
	}
	for _, e := range entries {
		if e.Verified != backup.StateVerified {
			t.Errorf("after prune %s is %s: %s", e.Name, e.Verified, e.Problem)
		}
	}
	r = h.run("backups", "prune")
	if r.code != 2 || !strings.Contains(r.stderr, "the retention policy keeps nothing") {
		t.Errorf("prune without a policy: %d\n%s", r.code, r.stderr)
	}
}

// TestIncrementalExportRestoresInACleanDataDir exports an incremental
// backup as one file, then, as on another host with the project's key
// and base image, restores it from that file into a clean data
// directory.
func TestIncrementalExportRestoresInACleanDataDir(t *testing.T) {
	t.Parallel()
	h := newHarness(t, v2Snapshots)
	_, inc := incrementalBackups(t, h, 1)
	h.WriteNote("changed after the backup\n")
	archive := strings.TrimSpace(mustRun(t, h, "backups", "export", filepath.Base(inc[0])).stdout)
	if filepath.Dir(archive) != filepath.Join(h.Root, "backups") || !strings.HasPrefix(filepath.Base(archive), backup.ExportPrefix) {
		t.Fatalf("export wrote %s", archive)
	}
	packaged(t, h, inc[0])
	mustRun(t, h, "destroy", "--force")

	fresh := t.TempDir()
	for _, d := range []string{"state", "images", "backups"} {
		boxtest.Must(t, os.MkdirAll(filepath.Join(fresh, d), 0o700))
	}
	for _, f := range []string{"state/hermes-box-ed25519", "state/hermes-box-ed25519.pub", "images/hermes-base.smolmachine"} {
		boxtest.Must(t, os.WriteFile(filepath.Join(fresh, f), boxtest.ReadFile(t, filepath.Join(h.Root, f)), 0o600))
	}
	sh(t, filepath.Dir(archive), "sha256sum", "-c", filepath.Base(archive)+".sha256")
	sh(t, filepath.Join(fresh, "backups"), "tar", "-xf", archive)
	h.Extra = []string{"HERMES_BOX_DATA_DIR=" + fresh}
	name := strings.TrimSuffix(filepath.Base(inc[0]), backup.Suffix)
	mustRun(t, h, "restore", name)
	if got := h.ReadNote(); got != "incremental\n" {
		t.Errorf("note after restoring the export = %q", got)
	}
	entries, _ := listBackups(t, h, "--verify")
	if len(entries) != 1 || entries[0].Incremental || entries[0].Verified != backup.StateVerified {
		t.Errorf("the clean data dir's backups: %+v", entries)
	}
}

// TestSnapshotPrunesByTheConfiguration: with HERMES_BOX_PRUNE_KEEP_LAST=1,
// each snapshot leaves only itself, and says so.
func TestSnapshotPrunesByTheConfiguration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "HERMES_BOX_PRUNE_KEEP_LAST=1")
	initBox(t, h)
	mustRun(t, h, "snapshot", "first")
	r := mustRun(t, h, "snapshot", "second")
	if !strings.Contains(r.stderr, "pruned by HERMES_BOX_PRUNE_KEEP_* (keep the last 1, 0 daily, 0 weekly): 1 kept, 1 removed") {
		t.Errorf("snapshot said:\n%s", r.stderr)
	}
	entries, _ := listBackups(t, h)
	if len(entries) != 1 || entries[0].Path != strings.TrimSpace(r.stdout) {
		t.Errorf("after the second snapshot: %+v", entries)
	}
}

// packaged runs `package --snapshot` of the incremental backup inc and
// checks that the package carries it as a v2 backup that verifies
// against the project key.
func packaged(t *testing.T, h *harness, inc string) {
	t.Helper()
	archive := strings.TrimSpace(mustRun(t, h, "package", "--snapshot", filepath.Base(inc), "move").stdout)
	out := t.TempDir()
	sh(t, out, "tar", "-xf", archive)
	dir := filepath.Join(out, "hermes-box", "backups", filepath.Base(inc))
	signer, err := keys.LoadProjectKey(filepath.Join(h.Root, "state", "hermes-box-ed25519"))
	boxtest.Must(t, err)
	v, err := backup.Verify(t.Context(), dir, backup.Trust{Key: signer.PublicKey()})
	if err != nil {
		t.Fatalf("the package's backup: %v", err)
	}
	if v.Manifest.Machine != boxtest.Machine || v.Manifest.Smolvm != "test" {
		t.Errorf("the package's backup: %+v", v.Manifest)
	}
}
