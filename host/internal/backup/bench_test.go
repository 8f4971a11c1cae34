package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The benchmark tree: ~500 MB, 40,000 small files of text in 400
// directories plus 12 large files of mixed text and random data. It is
// generated once per test process.
var (
	benchOnce  sync.Once
	benchRoot  string // holds workspace/
	benchBytes int64
	benchErr   error
)

func benchTree(b *testing.B) (root string, size int64) {
	b.Helper()
	benchOnce.Do(func() {
		benchRoot, benchErr = os.MkdirTemp("", "hb-bench-")
		if benchErr == nil {
			benchBytes, benchErr = genTree(filepath.Join(benchRoot, "workspace"))
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRoot, benchBytes
}

// genTree writes the tree and returns its total file size.
func genTree(dir string) (int64, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([][]byte, 2000)
	for i := range words {
		w := make([]byte, 2+rng.IntN(9))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		words[i] = w
	}
	text := make([]byte, 0, 8<<20)
	for len(text) < 8<<20 {
		text = append(text, words[rng.IntN(len(words))]...)
		text = append(text, " \n"[rng.IntN(12)/11])
	}
	noise := make([]byte, 8<<20)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	var total int64
	put := func(p string, data []byte) error {
		total += int64(len(data))
		return os.WriteFile(p, data, 0o644)
	}
	for d := range 400 {
		sub := filepath.Join(dir, fmt.Sprintf("work/pkg%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return 0, err
		}
		for f := range 100 {
			n, off := 256+rng.IntN(7<<10), rng.IntN(len(text)-8<<10)
			if err := put(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), text[off:off+n]); err != nil {
				return 0, err
			}
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		return 0, err
	}
	for i := range 12 {
		data := make([]byte, 0, 28<<20)
		for len(data) < 28<<20 {
			src := text
			if rng.IntN(3) == 0 {
				src = noise
			}
			off := rng.IntN(len(src) - 1<<20)
			data = append(data, src[off:off+1<<20]...)
		}
		if err := put(filepath.Join(big, fmt.Sprintf("blob%02d.bin", i)), data); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// pipeline runs cmds with each one's stdout feeding the next; the last
// one's stdout goes to out.
func pipeline(ctx context.Context, out io.Writer, cmds ...[]string) error {
	var procs []*exec.Cmd
	var prev io.Reader
	for i, argv := range cmds {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Stdin, c.Stderr = prev, os.Stderr
		if i == len(cmds)-1 {
			c.Stdout = out
		} else {
			r, err := c.StdoutPipe()
			if err != nil {
				return err
			}
			prev = r
		}
		procs = append(procs, c)
	}
	for _, c := range procs {
		if err := c.Start(); err != nil {
			return err
		}
	}
	for _, c := range procs {
		if err := c.Wait(); err != nil {
			return fmt.Errorf("%v: %w", c.Args, err)
		}
	}
	return nil
}

// BenchmarkSnapshotStream compares one pass of tar + gzip + SHA-256 over the
// same tree: the agent's `snapshot write` hashed by the host, the full
// backup Write (also listing and fsyncing the file), and the GNU tar
// baselines with gzip and with pigz.
func BenchmarkSnapshotStream(b *testing.B) {
	root, size := benchTree(b)
	ws := filepath.Join(root, "workspace")
	bin := agentBinary(b)
	for _, tool := range []string{"tar", "gzip", "pigz", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed", tool)
		}
	}
	checkSnapshotStream(b, bin, root, ws)
	b.Run("agent+sha256", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			h := sha256.New()
			c := exec.CommandContext(b.Context(), bin, "--root", root, "snapshot", "write", "workspace")
			c.Stdout = h
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backup-write", func(b *testing.B) {
		b.SetBytes(size)
		out := b.TempDir()
		for b.Loop() {
			_, _, err := writePart(b.Context(), filepath.Join(out, "w.tar.gz"), Limits{}.withDefaults(), func(w io.Writer) error {
				c := exec.CommandContext(b.Context(), bin, "--root", root, "snapshot", "write", "workspace")
				c.Stdout = w
				return c.Run()
			})
			if err != nil {
				b.Fatal(err)
			}
			_ = os.Remove(filepath.Join(out, "w.tar.gz"))
		}
	})
	b.Run("tar-czf+sha256sum", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := pipeline(b.Context(), io.Discard, []string{"tar", "-C", ws, "-czf", "-", "."}, []string{"sha256sum"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tar+pigz+sha256sum", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := pipeline(b.Context(), io.Discard, []string{"tar", "-C", ws, "-cf", "-", "."}, []string{"pigz"}, []string{"sha256sum"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// checkSnapshotStream checks the stream the benchmark measures: gzip -t
// accepts it, it is one gzip member, and its listing equals the tree.
func checkSnapshotStream(b *testing.B, bin, root, ws string) {
	out := filepath.Join(b.TempDir(), "workspace.tar.gz")
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	c := exec.CommandContext(b.Context(), bin, "--root", root, "snapshot", "write", "workspace")
	c.Stdout = f
	if err := c.Run(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if msg, err := exec.CommandContext(b.Context(), "gzip", "-t", out).CombinedOutput(); err != nil {
		b.Fatalf("gzip -t: %v: %s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	br := bytes.NewReader(data)
	zr, err := gzip.NewReader(br)
	if err != nil {
		b.Fatal(err)
	}
	zr.Multistream(false)
	var listed []string
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		listed = append(listed, strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/"))
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		b.Fatal(err)
	}
	if br.Len() != 0 {
		b.Fatalf("the stream has %d bytes after its first gzip member", br.Len())
	}
	var tree []string
	err = filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(ws, p)
		if rel == "." {
			rel = ""
		}
		tree = append(tree, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(listed)
	slices.Sort(tree)
	if !slices.Equal(listed, tree) {
		b.Fatalf("the stream lists %d entries, the tree has %d", len(listed), len(tree))
	}
}
