package backupset

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

var (
	testLimits = backup.Limits{FreeSpace: func(string) (int64, error) { return 1 << 50, nil }}
	projectKey = signerFrom(1)
)

// signerFrom is an Ed25519 project key made from seed.
func signerFrom(seed byte) ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		panic(err)
	}
	return s
}

// noise is n incompressible bytes drawn from seed.
func noise(seed string, n int) []byte {
	out := make([]byte, 0, n+32)
	for i := 0; len(out) < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", seed, i))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

// parts is a small box's rootfs and workspace: shared files every
// generation has, and a file of its own (so each backup adds chunks).
func parts(gen string) map[string][]byte {
	root := map[string][]byte{"etc/hostname": []byte("box\n"), "usr/lib/shared.so": noise("shared", 600<<10),
		"var/own-" + gen: noise("own-"+gen, 300<<10)}
	ws := map[string][]byte{"hermes-home/config.yaml": []byte("model: x\n"), "codex-home/config.toml": []byte("x = 1\n"),
		"work/notes.txt": []byte("generation " + gen + "\n")}
	return map[string][]byte{boxlayout.PartRootfs: gzipTar(root), boxlayout.PartWorkspace: gzipTar(ws)}
}

func gzipTar(files map[string][]byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	mt := time.Unix(1700000000, 0)
	dirs := map[string]bool{}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: mt})
	for _, n := range names {
		if d := filepath.Dir(n); !dirs[d] {
			dirs[d] = true
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mt})
		}
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: mt})
		_, _ = tw.Write(files[n])
	}
	_ = tw.Close()
	_ = zw.Close()
	return b.Bytes()
}

func source(p map[string][]byte) backup.PartSource {
	return func(_ context.Context, part string, w io.Writer) error {
		_, err := w.Write(p[part])
		return err
	}
}

// makeBackup writes a backup of machine created at when (a "2006-01-02
// 15:04" UTC time), incremental or v2, and returns its name.
func makeBackup(t testing.TB, dir, machine, when string, incremental bool) string {
	t.Helper()
	now, err := time.Parse("2006-01-02 15:04", when)
	if err != nil {
		t.Fatal(err)
	}
	label := strings.NewReplacer("-", "", " ", "t", ":", "").Replace(when)
	m := backup.Meta{Machine: machine, Label: label, Smolvm: "1.9.3", GOOS: "linux", Signer: projectKey, Now: now, Limits: testLimits}
	var path string
	if incremental {
		path, _, err = chunkstore.Ingest(t.Context(), dir, m, chunktest.Agent(parts(label), chunktest.Mutation{}, nil), nil)
	} else {
		path, err = backup.Write(t.Context(), dir, m, source(parts(label)))
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(path)
}

// names are the backup directories in dir (any other entry starting
// with "." reported too, so a leftover shows).
func names(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if de.Name() != ".chunks" {
			out = append(out, de.Name())
		}
	}
	return out
}
