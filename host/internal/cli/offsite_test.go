package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// writeRandomFile writes n random bytes (content no store holds yet) to
// rel in the box's root file system, as the box's own files are.
func writeRandomFile(t *testing.T, h *harness, rel string, n int) {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	p := filepath.Join(h.State, "machines", boxtest.Machine, "root", rel)
	boxtest.Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	boxtest.Must(t, os.WriteFile(p, data, 0o644))
}

// TestOffsiteCopyRestoresOnAFreshHost is the README's "Keeping a copy
// elsewhere" through the binary: snapshot says what it added and what it
// restores to; a copy of the incremental backup's directory alone fails
// naming `backups export`, and creates nothing where it lies; `backups
// export latest` writes one file and its .sha256, which restore takes as
// it is in a fresh data directory (the key and the base image carried):
// a damaged copy is refused before anything is unpacked, a whole one
// restores the box as it was.
func TestOffsiteCopyRestoresOnAFreshHost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.WriteNote("kept elsewhere\n")
	writeRandomFile(t, h, "workspace/work/blob.bin", 2<<20)
	r := mustRun(t, h, "snapshot", "nightly")
	dir := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`backup \S+: added \d[\d.]* [KMG]?i?B to the store; restores to \d[\d.]* [KMG]?i?B`).MatchString(r.stderr) {
		t.Errorf("snapshot's size line:\n%s", r.stderr)
	}

	// The stub alone, copied as a user would: refused, naming the way.
	usb := t.TempDir()
	sh(t, usb, "cp", "-r", dir, usb)
	r = h.run("restore", filepath.Join(usb, filepath.Base(dir)))
	if r.code == 0 || !strings.Contains(r.stderr, "is an incremental backup: its directory holds only its record") ||
		!strings.Contains(r.stderr, "hermes-box backups export NAME") {
		t.Fatalf("restore of the copied stub: %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(usb, ".chunks")); err == nil {
		t.Errorf("restore of the copied stub created a chunk store beside it")
	}

	archive := strings.TrimSpace(mustRun(t, h, "backups", "export", "latest").stdout)
	if filepath.Base(archive) != backup.ExportPrefix+strings.TrimSuffix(filepath.Base(dir), backup.Suffix)+".tar" {
		t.Fatalf("export latest wrote %s", archive)
	}
	table := mustRun(t, h, "backups").stdout
	if !strings.Contains(table, "exports and packages") || !strings.Contains(table, filepath.Base(archive)) ||
		!regexp.MustCompile(`on disk: \d[\d.]* [KMG]?i?B in all: chunk stores `).MatchString(table) {
		t.Errorf("backups does not list the export and the total:\n%s", table)
	}
	for _, f := range []string{archive, archive + ".sha256"} {
		sh(t, usb, "cp", f, usb)
	}
	mustRun(t, h, "destroy", "--force")

	fresh := t.TempDir()
	for _, d := range []string{"state", "images"} {
		boxtest.Must(t, os.MkdirAll(filepath.Join(fresh, d), 0o700))
	}
	for _, f := range []string{"state/hermes-box-ed25519", "state/hermes-box-ed25519.pub", "images/hermes-base.smolmachine"} {
		boxtest.Must(t, os.WriteFile(filepath.Join(fresh, f), boxtest.ReadFile(t, filepath.Join(h.Root, f)), 0o600))
	}
	h.Extra = []string{"HERMES_BOX_DATA_DIR=" + fresh}
	copied := filepath.Join(usb, filepath.Base(archive))

	// A damaged copy: refused by its .sha256, nothing unpacked.
	damaged := filepath.Join(t.TempDir(), filepath.Base(archive))
	data := boxtest.ReadFile(t, copied)
	data[len(data)/2] ^= 1
	boxtest.Must(t, os.WriteFile(damaged, data, 0o600))
	boxtest.Must(t, os.WriteFile(damaged+".sha256", boxtest.ReadFile(t, copied+".sha256"), 0o600))
	r = h.run("restore", damaged)
	if r.code == 0 || !strings.Contains(r.stderr, "the copy is damaged") {
		t.Fatalf("restore of a damaged copy: %d\n%s", r.code, r.stderr)
	}
	if des, _ := os.ReadDir(filepath.Join(fresh, "backups")); len(des) != 0 {
		t.Errorf("a refused copy left %v in backups/", des)
	}

	r = mustRun(t, h, "restore", copied)
	if got := h.ReadNote(); got != "kept elsewhere\n" {
		t.Errorf("note after restoring the copy = %q", got)
	}
	entries, _ := listBackups(t, h, "--verify")
	if len(entries) != 1 || entries[0].Name != filepath.Base(dir) || entries[0].Verified != backup.StateVerified {
		t.Errorf("the fresh data dir's backups: %+v", entries)
	}
	mustRun(t, h, "stop")
}

// TestPruneDryRunFreesWhatThePruneFrees: a dry run's figure is the one
// the prune then reports, byte for byte, with packs dropped and a pack
// repacked, and the packs on disk shrink by it; `backups` shows the
// directory's total. The backups are written as the box's agent sends
// them (chunktest), with no box: prune needs none.
func TestPruneDryRunFreesWhatThePruneFrees(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	signer, err := keys.LoadProjectKey(filepath.Join(h.Root, "state", "hermes-box-ed25519"))
	boxtest.Must(t, err)
	shared := randomBytes(512 << 10)
	// The oldest holds 3 MiB of its own beside the shared file, in one
	// pack: once it goes, that pack is mostly dead and is repacked.
	for i, own := range []int{3 << 20, 1 << 20, 0} {
		files := map[string][]byte{"usr/lib/shared.so": shared}
		if own > 0 {
			files[fmt.Sprintf("var/own-%d", i)] = randomBytes(own)
		}
		parts := map[string][]byte{boxlayout.PartRootfs: gzipTar(t, files), boxlayout.PartWorkspace: gzipTar(t, map[string][]byte{"work/n.txt": []byte("x\n"), "hermes-home/config.yaml": []byte("model: x\n"), "codex-home/config.toml": []byte("x = 1\n")})}
		m := backup.Meta{Machine: boxtest.Machine, Label: fmt.Sprintf("gen%d", i), Smolvm: "test", GOOS: "linux", Signer: signer,
			Now: time.Now().AddDate(0, 0, i-3)}
		_, _, err := chunkstore.Ingest(t.Context(), filepath.Join(h.Root, "backups"), m, chunktest.Agent(parts, chunktest.Mutation{}, nil), nil)
		boxtest.Must(t, err)
	}
	before := packBytes(t, h)
	prune := func(args ...string) backupset.PruneReport {
		t.Helper()
		r := mustRun(t, h, append([]string{"backups", "prune", "--keep-last", "1", "--json"}, args...)...)
		var rep backupset.PruneReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("prune --json: %v\n%s", err, r.stdout)
		}
		return rep
	}
	dry := prune("--dry-run")
	text := mustRun(t, h, "backups", "prune", "--keep-last", "1", "--dry-run").stdout
	real := prune()
	if dry.Collected == nil || real.Collected == nil || *dry.Collected != *real.Collected || dry.Freed != real.Freed {
		t.Fatalf("the dry run said %+v (%d freed), the prune %+v (%d freed)", dry.Collected, dry.Freed, real.Collected, real.Freed)
	}
	if real.Freed < 4<<20 || real.Collected.PacksRemoved < 2 || real.Collected.PacksRepacked != 1 {
		t.Errorf("pruning two backups of 3 and 1 MiB of their own freed %d bytes: %+v", real.Freed, real.Collected)
	}
	if !strings.Contains(text, "2 would remove, ") || !strings.Contains(text, " would be freed") ||
		!strings.Contains(text, "added ") || !strings.Contains(text, "to the store; restores to ") {
		t.Errorf("prune --dry-run said:\n%s", text)
	}
	if after := packBytes(t, h); before-after != real.Collected.BytesFreed {
		t.Errorf("the packs went from %d to %d bytes; the prune said it freed %d", before, after, real.Collected.BytesFreed)
	}
	entries, _ := listBackups(t, h, "--read-data")
	if len(entries) != 1 || entries[0].Verified != backup.StateVerified {
		t.Errorf("after the prune: %+v", entries)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// gzipTar is a part as the agent streams it: a gzip tar of files.
func gzipTar(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	mt := time.Unix(1700000000, 0)
	boxtest.Must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: mt}))
	dirs := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if d := filepath.Dir(n); !dirs[d] {
			dirs[d] = true
			boxtest.Must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mt}))
		}
		boxtest.Must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: mt}))
		_, err := tw.Write(files[n])
		boxtest.Must(t, err)
	}
	boxtest.Must(t, tw.Close())
	boxtest.Must(t, zw.Close())
	return b.Bytes()
}

// packBytes is the size of every pack of the chunk stores, counted
// here, after checking that `backups` shows the directory's total.
func packBytes(t *testing.T, h *harness) int64 {
	t.Helper()
	out := mustRun(t, h, "backups").stdout
	if !regexp.MustCompile(`(?m)^on disk: \d[\d.]* [KMG]?i?B in all: chunk stores \d`).MatchString(out) {
		t.Fatalf("backups shows no total:\n%s", out)
	}
	packs, err := filepath.Glob(filepath.Join(h.Root, "backups", ".chunks", "*", "packs", "*.pack"))
	boxtest.Must(t, err)
	var n int64
	for _, p := range packs {
		fi, err := os.Stat(p)
		boxtest.Must(t, err)
		n += fi.Size()
	}
	return n
}
