package cdc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// stream is n deterministic pseudo-random bytes (SHA-256 in counter mode).
func stream(seed string, n int) []byte {
	out := make([]byte, 0, n+32)
	var ctr [8]byte
	for i := uint64(0); len(out) < n; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		sum := sha256.Sum256(append([]byte(seed), ctr[:]...))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

func chunks(t *testing.T, r io.Reader) [][]byte {
	t.Helper()
	c := New(r)
	var out [][]byte
	for {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(b))
	}
}

// TestGolden freezes the chunker: the cut points of a fixed stream and the
// gear table's digest. A change here changes every chunk id in every store.
func TestGolden(t *testing.T) {
	var got strings.Builder
	h := sha256.New()
	for _, g := range gear {
		_ = binary.Write(h, binary.BigEndian, g)
	}
	fmt.Fprintf(&got, "name %s\ngear %x\n", Name, h.Sum(nil))
	for _, c := range chunks(t, bytes.NewReader(stream("golden", 8<<20))) {
		fmt.Fprintf(&got, "%d %x\n", len(c), sha256.Sum256(c))
	}
	path := filepath.Join("testdata", "cuts.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("chunker output changed (a frozen format):\n got %s\nwant %s", got.String(), want)
	}
}

func TestBoundsAndConcatenation(t *testing.T) {
	zeros := make([]byte, 2*MaxSize+5)
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{1}},
		{"below min", stream("a", MinSize-1)},
		{"random", stream("b", 3<<20+123)},
		{"zeros (no cut point: max size)", zeros},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time must cut exactly as a whole buffer
			// does, and so must the Writer.
			got := chunks(t, iotest.OneByteReader(bytes.NewReader(tt.data)))
			whole := chunks(t, bytes.NewReader(tt.data))
			if len(got) != len(whole) {
				t.Fatalf("%d chunks reading byte by byte, %d reading whole", len(got), len(whole))
			}
			var written [][]byte
			w := NewWriter(func(c []byte) error { written = append(written, bytes.Clone(c)); return nil })
			for rest, n := tt.data, 1; len(rest) > 0; n = n*7%40000 + 1 { // uneven writes
				k := min(n, len(rest))
				if _, err := w.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range max(len(written), len(whole)) {
				if i >= len(written) || i >= len(whole) || !bytes.Equal(written[i], whole[i]) {
					t.Fatalf("the Writer's chunk %d differs from the Chunker's (%d and %d chunks)", i, len(written), len(whole))
				}
			}
			if !bytes.Equal(bytes.Join(got, nil), tt.data) {
				t.Fatal("chunks do not concatenate to the input")
			}
			for i, c := range got {
				if len(c) > MaxSize || (len(c) < MinSize && i != len(got)-1) {
					t.Fatalf("chunk %d of %d has %d bytes", i, len(got), len(c))
				}
			}
		})
	}
}

// TestInsertionResyncs: bytes inserted in the middle change only the
// chunks around them; the rest are found again.
func TestInsertionResyncs(t *testing.T) {
	base := stream("c", 16<<20)
	edited := append(append(bytes.Clone(base[:8<<20]), stream("ins", 1000)...), base[8<<20:]...)
	seen := map[[32]byte]bool{}
	var total int
	for _, c := range chunks(t, bytes.NewReader(base)) {
		seen[sha256.Sum256(c)] = true
		total += len(c)
	}
	var fresh int
	for _, c := range chunks(t, bytes.NewReader(edited)) {
		if !seen[sha256.Sum256(c)] {
			fresh += len(c)
		}
	}
	if fresh > 3*MaxSize {
		t.Fatalf("a 1000-byte insertion made %d new bytes of chunks (of %d)", fresh, total)
	}
	if n := len(chunks(t, bytes.NewReader(base))); n < (16<<20)/MaxSize || n > (16<<20)/MinSize {
		t.Fatalf("%d chunks for 16 MiB", n)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	c := New(io.MultiReader(bytes.NewReader(stream("d", 10)), iotest.ErrReader(boom)))
	if _, err := c.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func BenchmarkChunker(b *testing.B) {
	data := stream("bench", 64<<20)
	b.SetBytes(int64(len(data)))
	c := New(nil)
	for b.Loop() {
		c.Reset(bytes.NewReader(data))
		for {
			if _, err := c.Next(); err != nil {
				break
			}
		}
	}
}
