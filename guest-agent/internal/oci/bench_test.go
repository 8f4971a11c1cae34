package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs/tarfstest"
)

// benchImage is the ~300 MB three-layer image the extraction benchmark
// shares across its runs; TestMain removes it.
var benchImage struct {
	once   sync.Once
	dir    string
	layers []ispec.Descriptor
	bytes  int64 // uncompressed file bytes, for MB/s
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchImage.dir != "" {
		os.RemoveAll(benchImage.dir)
	}
	os.Exit(code)
}

// benchContent fills b with incompressible bytes (odd files) or with
// source-like text (even files), so gzip sees both kinds.
func benchContent(rng *rand.Rand, b []byte, compressible bool) {
	if !compressible {
		for i := 0; i+8 <= len(b); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return
	}
	var line []byte
	for i := 0; i < len(b); i += len(line) {
		line = fmt.Appendf(line[:0], "export const value%d = computeSomething(%d, \"%x\");\n", rng.IntN(5000), rng.IntN(1<<20), rng.Uint32())
		copy(b[i:], line)
	}
}

// benchLayer writes one gzipped layer of files under app/<name>/ and
// returns its blob and the file bytes it holds.
func benchLayer(rng *rand.Rand, name string, big, small int, extra []ent) ([]byte, int64) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	var total int64
	mtime := time.Unix(1700000000, 0)
	write := func(hdr *tar.Header, body []byte) {
		hdr.ModTime, hdr.Format = mtime, tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			panic(err)
		}
		if _, err := tw.Write(body); err != nil {
			panic(err)
		}
		total += int64(len(body))
	}
	write(&tar.Header{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	write(&tar.Header{Name: "app/" + name + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	for _, e := range extra {
		write(&tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Size: int64(len(e.Body))}, []byte(e.Body))
	}
	body := make([]byte, 1<<20)
	for i := range big {
		benchContent(rng, body, i%2 == 0)
		write(&tar.Header{Name: fmt.Sprintf("app/%s/big-%03d.bin", name, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, body)
	}
	write(&tar.Header{Name: "app/" + name + "/small/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	sbody := make([]byte, 16<<10)
	for i := range small {
		benchContent(rng, sbody, i%4 != 0)
		write(&tar.Header{Name: fmt.Sprintf("app/%s/small/f-%04d.js", name, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(sbody))}, sbody)
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		panic(err)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return gz.Bytes(), total
}

// setupBenchImage generates the three layers once: 150 + 100 + 50 MB of
// big files and 16 KiB files, the last layer with whiteouts and an opaque
// directory over the first.
func setupBenchImage(b *testing.B) {
	benchImage.once.Do(func() {
		tmp, err := os.MkdirTemp("", "oci-bench-")
		if err != nil {
			benchImage.err = err
			return
		}
		benchImage.dir = tmp
		rng := rand.New(rand.NewPCG(1, 2))
		l1, n1 := benchLayer(rng, "one", 120, 1900, nil)
		l2, n2 := benchLayer(rng, "two", 80, 1200, nil)
		wh := []ent{file("app/one/.wh.big-000.bin", ""), file("app/one/.wh.big-001.bin", ""),
			dir("app/one/small/"), file("app/one/small/.wh..wh..opq", "")}
		l3, n3 := benchLayer(rng, "three", 40, 600, wh)
		benchImage.layers = writeLayout(b, filepath.Join(tmp, "layout"), l1, l2, l3)
		benchImage.bytes = n1 + n2 + n3
	})
	if benchImage.err != nil {
		b.Fatal(benchImage.err)
	}
}

// BenchmarkExtractSyntheticHalfRandom compares the agent's extraction
// (digest check, pre-check, selection, tarfs unpack, whiteouts) with GNU tar
// -xzf of the same blobs, in one process, on a synthetic image of about
// 4,300 entries at gzip level 1, half of it random data. The image shaped
// like Executor's is tarfs' BenchmarkUnpackRealShaped.
func BenchmarkExtractSyntheticHalfRandom(b *testing.B) {
	setupBenchImage(b)
	checkSyntheticExtraction(b)
	b.Run("agent", func(b *testing.B) {
		b.SetBytes(benchImage.bytes)
		for b.Loop() {
			dest := benchDest(b)
			if err := Extract(b.Context(), filepath.Join(benchImage.dir, "layout"), benchImage.layers, dest, ExtractOptions{UID: -1, GID: -1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gnu-tar", func(b *testing.B) {
		tarBin, err := exec.LookPath("tar")
		if err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatal("GNU tar not found")
			}
			b.Skip("GNU tar not found")
		}
		b.SetBytes(benchImage.bytes)
		for b.Loop() {
			dest := benchDest(b)
			for _, l := range benchImage.layers {
				blob, _ := blobPath(filepath.Join(benchImage.dir, "layout"), string(l.Digest))
				if out, err := exec.CommandContext(b.Context(), tarBin, "-xzf", blob, "-C", dest).CombinedOutput(); err != nil {
					b.Fatalf("tar: %v: %s", err, out)
				}
			}
		}
	})
}

// checkSyntheticExtraction checks what the benchmark measures: the agent's
// tree equals GNU tar's extraction of the same layers with their whiteouts
// applied (content, modes, links, times).
func checkSyntheticExtraction(b *testing.B) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		return // the gnu-tar sub-benchmark says so
	}
	layout := filepath.Join(benchImage.dir, "layout")
	got, want := filepath.Join(b.TempDir(), "agent"), filepath.Join(b.TempDir(), "tar")
	var blobs []string
	for _, l := range benchImage.layers {
		p, err := blobPath(layout, string(l.Digest))
		if err != nil {
			b.Fatal(err)
		}
		blobs = append(blobs, p)
	}
	for _, d := range []string{got, want} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := Extract(b.Context(), layout, benchImage.layers, got, ExtractOptions{UID: -1, GID: -1}); err != nil {
		b.Fatal(err)
	}
	if err := tarfstest.TarReference(b.Context(), tarBin, blobs, want); err != nil {
		b.Fatal(err)
	}
	if err := tarfstest.CompareTrees(got, want); err != nil {
		b.Fatalf("the agent's extraction differs from GNU tar's: %v", err)
	}
}

// benchDest returns a fresh destination, removed outside the timed region.
func benchDest(b *testing.B) string {
	b.StopTimer()
	dest := filepath.Join(benchImage.dir, "dest")
	if err := os.RemoveAll(dest); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return dest
}
