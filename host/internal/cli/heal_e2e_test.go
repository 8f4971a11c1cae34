package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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

// corruptStoredBytes flips one byte of the store's copy of content (a
// stretch of incompressible file data, so stored as it is) in its pack,
// as a failing disk would.
func corruptStoredBytes(t *testing.T, h *harness, content []byte) {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(chunkstore.StoreDir(filepath.Join(h.Root, "backups"), boxtest.Machine), "packs", "*.pack"))
	boxtest.Must(t, err)
	for _, p := range packs {
		data := boxtest.ReadFile(t, p)
		at := bytes.Index(data, content)
		if at < 0 {
			continue
		}
		data[at+len(content)/2] ^= 0xff
		boxtest.Must(t, os.Chmod(p, 0o600))
		boxtest.Must(t, os.WriteFile(p, data, 0o600))
		return
	}
	t.Fatalf("no pack of %d holds the content", len(packs))
}

// TestCorruptChunkFoundAndHealed runs a store that heals through the real
// binary, Debian's sshd, the fake smolvm and the real agent: a byte
// flipped in a pack makes `backups --verify` fail (a small store is read
// whole by its sample) naming the backup, the file and what recovers it;
// `backups repair` says the same; the next snapshot re-sends the chunk
// from the box, after which --verify passes and the first backup
// restores.
func TestCorruptChunkFoundAndHealed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	bigPath := filepath.Join(h.State, "machines", boxtest.Machine, "root", "workspace/work/big.bin")
	big := noise("heal", 2<<20)
	boxtest.Must(t, os.WriteFile(bigPath, []byte(big), 0o644))
	h.WriteNote("first\n")
	first := strings.TrimSpace(mustRun(t, h, "snapshot", "first").stdout)

	corruptStoredBytes(t, h, []byte(big[1<<10:9<<10]))
	r := h.run("backups", "--verify")
	if r.code != 1 || !strings.Contains(r.stdout, "set aside") || !strings.Contains(r.stdout, "work/big.bin") ||
		!strings.Contains(r.stderr, "set aside in "+filepath.Base(first)) || !strings.Contains(r.stderr, "take a snapshot") {
		t.Fatalf("backups --verify with a corrupt chunk exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = h.run("backups", "repair")
	if r.code != 1 || !strings.Contains(r.stdout, "set aside") || !strings.Contains(r.stderr, "take a snapshot") {
		t.Fatalf("backups repair with a chunk set aside exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The box still has the file: the next snapshot stores the chunk again.
	h.WriteNote("second\n")
	mustRun(t, h, "snapshot", "second")
	entries, r := listBackups(t, h, "--verify")
	for _, e := range entries {
		if e.Verified != backup.StateVerified {
			t.Errorf("after the healing snapshot %s is %s: %s", e.Name, e.Verified, e.Problem)
		}
	}
	if r.code != 0 {
		t.Fatalf("backups --verify after the healing snapshot exited %d: %s", r.code, r.stderr)
	}
	mustRun(t, h, "restore", first)
	if got := h.ReadNote(); got != "first\n" {
		t.Fatalf("note after restoring the first = %q", got)
	}
	if got := string(boxtest.ReadFile(t, bigPath)); got != big {
		t.Fatal("the large file after restoring the first is not the first's")
	}
}

// gzipTar is a part as `snapshot write` sends it: files (a name ending
// in / is a directory) in a gzip tar.
func gzipTarFiles(t *testing.T, files [][2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f[0], "/") {
			hdr.Mode, hdr.Size, hdr.Typeflag = 0o755, 0, tar.TypeDir
		}
		boxtest.Must(t, tw.WriteHeader(hdr))
		_, err := tw.Write([]byte(f[1]))
		boxtest.Must(t, err)
	}
	boxtest.Must(t, tw.Close())
	boxtest.Must(t, zw.Close())
	return b.Bytes()
}

// TestBackupsVerifyFindsAndHealsCorruptChunk runs `backups --verify` and
// `backups repair` through the binary on incremental backups written by
// the real Ingest from the test agent's streams (no box needed): a byte
// flipped in a pack fails --verify (its sample reads a small store whole)
// naming the backup, the file and what recovers it, and repair says the
// same; the next backup of the same content stores the chunk again, and
// then --verify and --read-data pass.
func TestBackupsVerifyFindsAndHealsCorruptChunk(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	state := filepath.Join(h.Root, "state")
	boxtest.Must(t, os.MkdirAll(state, 0o700))
	signer, err := keys.EnsureProjectKey(filepath.Join(state, "hermes-box-ed25519"), "hermes-box test")
	boxtest.Must(t, err)
	big := noise("heal", 2<<20)
	parts := map[string][]byte{
		chunkstore.Parts[0]: gzipTarFiles(t, [][2]string{{"etc/", ""}, {"etc/hostname", "box\n"}}),
		chunkstore.Parts[1]: gzipTarFiles(t, [][2]string{{"hermes-home/", ""}, {"hermes-home/config.yaml", "model: x\n"},
			{"codex-home/", ""}, {"codex-home/config.toml", "x = 1\n"}, {"work/", ""}, {"work/big.bin", big}}),
	}
	ingest := func(label string, ago int) string {
		m := backup.Meta{Machine: boxtest.Machine, Label: label, Smolvm: "test", GOOS: "linux", Signer: signer,
			Now: time.Now().Add(-time.Duration(ago) * time.Hour)}
		dir, _, err := chunkstore.Ingest(t.Context(), filepath.Join(h.Root, "backups"), m, chunktest.Agent(parts, chunktest.Mutation{}, nil), nil)
		boxtest.Must(t, err)
		return dir
	}
	first := ingest("first", 2)
	if r := h.run("backups", "--verify"); r.code != 0 {
		t.Fatalf("backups --verify of a whole store exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	corruptStoredBytes(t, h, []byte(big[1<<10:9<<10]))
	r := h.run("backups", "--verify")
	if r.code != 1 || !strings.Contains(r.stdout, "set aside") || !strings.Contains(r.stdout, "work/big.bin") ||
		!strings.Contains(r.stderr, "set aside in "+filepath.Base(first)) || !strings.Contains(r.stderr, "take a snapshot") {
		t.Fatalf("backups --verify with a corrupt chunk exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("backups --verify:\n%s%s", r.stdout, r.stderr)
	r = h.run("backups", "repair")
	if r.code != 1 || !strings.Contains(r.stdout, "set aside") || !strings.Contains(r.stderr, "take a snapshot") {
		t.Fatalf("backups repair with a chunk set aside exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("backups repair:\n%s%s", r.stdout, r.stderr)

	ingest("second", 1)
	for _, flag := range []string{"--verify", "--read-data"} {
		entries, r := listBackups(t, h, flag)
		for _, e := range entries {
			if e.Verified != backup.StateVerified {
				t.Errorf("%s after the healing backup: %s is %s: %s", flag, e.Name, e.Verified, e.Problem)
			}
		}
		if r.code != 0 || len(entries) != 2 {
			t.Fatalf("backups %s after the healing backup exited %d (%d backups): %s", flag, r.code, len(entries), r.stderr)
		}
	}
}
