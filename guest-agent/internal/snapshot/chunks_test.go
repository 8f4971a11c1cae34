package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
)

// chunkRun is one `snapshot chunks` run's stream, read back.
type chunkRun struct {
	sent []chunkwire.ID
	end  *chunkwire.End
}

func runChunks(t *testing.T, dir, cache string, held *chunkwire.Held) chunkRun {
	t.Helper()
	var in, out bytes.Buffer
	if err := chunkwire.WriteHeld(&in, held); err != nil {
		t.Fatal(err)
	}
	if err := Chunks(context.Background(), &in, &out, Spec{Dir: dir}, ChunkOptions{Part: "workspace", CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	var run chunkRun
	fr := chunkwire.NewReader(&out)
	for run.end == nil {
		c, _, end, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			run.sent = append(run.sent, c.ID)
		}
		run.end = end
	}
	return run
}

func heldOf(committed chunkwire.ID, runs ...chunkRun) *chunkwire.Held {
	h := &chunkwire.Held{Committed: committed}
	for _, r := range runs {
		for _, id := range r.sent {
			h.Prefixes = append(h.Prefixes, chunkwire.Prefix(id))
		}
	}
	slices.Sort(h.Prefixes)
	h.Prefixes = slices.Compact(h.Prefixes)
	return h
}

// TestChunksSendsWhatTheHostLacks: a second run against what the host
// holds sends only the changed file's chunks and the tree's, and reads
// no unchanged file once the host names the first run as committed; an
// uncommitted run's cache is never taken.
func TestChunksSendsWhatTheHostLacks(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	for i := range 8 {
		data := bytes.Repeat(fmt.Appendf(nil, "file %d ", i), 40<<10)
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), data, 0o644))
	}
	first := runChunks(t, dir, cache, &chunkwire.Held{})
	if first.end.Read != first.end.Bytes || len(first.sent) == 0 {
		t.Fatalf("first run: read %d of %d bytes, sent %d chunks", first.end.Read, first.end.Bytes, len(first.sent))
	}
	must(t, os.WriteFile(filepath.Join(dir, "f3"), []byte("changed"), 0o644))

	// The host committed the first: only the changed file is read, and
	// only its chunk and the tree's are sent.
	second := runChunks(t, dir, cache, heldOf(chunkwire.Token(first.end.Tree), first))
	if second.end.Read != uint64(len("changed")) {
		t.Fatalf("second run read %d bytes, want only the changed file's", second.end.Read)
	}
	for _, id := range second.sent {
		if slices.Contains(first.sent, id) {
			t.Fatalf("second run sent chunk %x, which the host held", id)
		}
	}
	if want := sha256.Sum256([]byte("changed")); !slices.Contains(second.sent, want) {
		t.Fatal("second run did not send the changed file's chunk")
	}
	// The second was not committed (the host names the first again): its
	// cache is not taken, so the changed file is read again.
	third := runChunks(t, dir, cache, heldOf(chunkwire.Token(first.end.Tree), first))
	if third.end.Read != uint64(len("changed")) {
		t.Fatalf("third run read %d bytes: an uncommitted cache was taken", third.end.Read)
	}
	// Committed: nothing is read, nothing is sent.
	fourth := runChunks(t, dir, cache, heldOf(chunkwire.Token(third.end.Tree), first, third))
	if fourth.end.Read != 0 || len(fourth.sent) != 0 {
		t.Fatalf("fourth run read %d bytes and sent %d chunks; want none", fourth.end.Read, len(fourth.sent))
	}
	if fourth.end.Bytes != first.end.Bytes-uint64(40<<10*len("file 3 "))+uint64(len("changed")) {
		t.Fatalf("fourth run's tree holds %d bytes", fourth.end.Bytes)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCompressible: the probe skips only content that looks random in
// every window.
func TestCompressible(t *testing.T) {
	random := make([]byte, 256<<10)
	for i := 0; i < len(random); i += sha256.Size {
		sum := sha256.Sum256(fmt.Append(nil, i))
		copy(random[i:], sum[:])
	}
	text := bytes.Repeat([]byte("func main() { return value }\n"), len(random)/29+1)[:len(random)]
	mixed := append(append([]byte(nil), random[:len(random)*3/4]...), text[:len(random)/4]...)
	tests := []struct {
		name string
		data []byte
		want bool
	}{
		{"random", random, false},
		{"text", text, true},
		{"three quarters random", mixed, true},
		{"too short to probe", random[:8<<10], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compressible(tt.data); got != tt.want {
				t.Fatalf("compressible = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChunksFailsOnAClosedStream: when the host stops reading, Chunks
// returns the write's error (its compressors and writer end) and writes
// no cache.
func TestChunksFailsOnAClosedStream(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	for i := range 4 {
		data := bytes.Repeat(fmt.Appendf(nil, "file %d ", i), 40<<10)
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), data, 0o644))
	}
	var in bytes.Buffer
	must(t, chunkwire.WriteHeld(&in, &chunkwire.Held{}))
	err := Chunks(context.Background(), &in, &failingWriter{left: 200}, Spec{Dir: dir}, ChunkOptions{Part: "workspace", CacheDir: cache})
	if !errors.Is(err, errHostGone) {
		t.Fatalf("err = %v, want the stream's error", err)
	}
	if names, _ := os.ReadDir(cache); len(names) != 0 {
		t.Fatalf("a failed run wrote a cache: %v", names)
	}
}

var errHostGone = errors.New("the host stopped reading")

// failingWriter takes left bytes, then fails.
type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errHostGone
	}
	w.left -= len(p)
	return len(p), nil
}
