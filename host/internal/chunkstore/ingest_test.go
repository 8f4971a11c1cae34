package chunkstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// agentMutation changes what the test agent sends.
type agentMutation = chunktest.Mutation

// chunkAgent is the agent's side of `snapshot chunks` for the test parts
// (chunktest.Agent of their gzip tars).
func chunkAgent(parts map[string][]tfile, mut agentMutation, sent *int) ChunkSource {
	gz := map[string][]byte{}
	for name, files := range parts {
		gz[name] = gzipTar(files)
	}
	return chunktest.Agent(gz, mut, sent)
}

func ingestGen(t testing.TB, backups string, gen int, mut agentMutation) (string, *Record, int, error) {
	t.Helper()
	var sent int
	dir, rec, err := Ingest(context.Background(), backups, meta(gen), chunkAgent(boxParts(gen), mut, &sent), nil)
	return dir, rec, sent, err
}

// TestIngestSendsOnlyNewChunks snapshots, changes, snapshots: the second
// stream carries only the chunks the change made, and both restore.
func TestIngestSendsOnlyNewChunks(t *testing.T) {
	backups := t.TempDir()
	dir0, rec0, sent0, err := ingestGen(t, backups, 0, agentMutation{})
	must(t, err)
	dir1, rec1, sent1, err := ingestGen(t, backups, 1, agentMutation{})
	must(t, err)
	if int64(sent0) != rec0.Added.Chunks || int64(sent1) != rec1.Added.Chunks {
		t.Fatalf("sent %d and %d chunks, the store added %d and %d", sent0, sent1, rec0.Added.Chunks, rec1.Added.Chunks)
	}
	if sent1 == 0 || sent1*3 > sent0 {
		t.Fatalf("the second snapshot sent %d chunks, the first %d", sent1, sent0)
	}
	restored(t, backups, dir0, 0)
	restored(t, backups, dir1, 1)
}

// TestIngestRefusesHostileAgent: each hostile stream is refused, nothing
// is published, the store holds what it held, and the last good backup
// restores.
func TestIngestRefusesHostileAgent(t *testing.T) {
	bomb := func(c *chunkwire.Chunk) *chunkwire.Chunk {
		zw, _ := zstd.NewWriter(nil)
		c.Stored, c.Compression = zw.EncodeAll(make([]byte, 64<<20), nil), chunkwire.Zstd
		return c
	}
	first := func(f func(c *chunkwire.Chunk) *chunkwire.Chunk) func(c *chunkwire.Chunk) *chunkwire.Chunk {
		done := false
		return func(c *chunkwire.Chunk) *chunkwire.Chunk {
			if done {
				return c
			}
			done = true
			return f(c)
		}
	}
	tests := []struct {
		name string
		mut  agentMutation
		want string
	}{
		{"a chunk whose hash does not match", agentMutation{Chunk: first(func(c *chunkwire.Chunk) *chunkwire.Chunk {
			c.ID[0] ^= 1
			return c
		})}, "hashes to"},
		{"an oversized chunk", agentMutation{Chunk: first(func(c *chunkwire.Chunk) *chunkwire.Chunk {
			big := make([]byte, MaxChunk+1)
			c.ID, c.Plain, c.Compression, c.Stored = sha256.Sum256(big), uint32(len(big)), chunkwire.Plain, big
			return c
		})}, "over the limit"},
		{"a decompression bomb", agentMutation{Chunk: first(bomb)}, "does not decompress"},
		{"a chunk neither held nor sent", agentMutation{Chunk: first(func(*chunkwire.Chunk) *chunkwire.Chunk { return nil })}, "neither held nor sent"},
		{"a tree chunk neither held nor sent", agentMutation{End: func(e *chunkwire.End) {
			e.Tree = append([]chunkwire.ID{sha256.Sum256([]byte("missing"))}, e.Tree...)
		}}, "neither held nor sent"},
		{"a tree entry breaking the content rules", agentMutation{End: func(e *chunkwire.End) {
			e.Tree = evilTree
		}}, "unsafe path"},
		{"an empty tree", agentMutation{End: func(e *chunkwire.End) { e.Tree = nil }}, "chunks sent that the tree does not name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backups := t.TempDir()
			dir0, _, _, err := ingestGen(t, backups, 0, agentMutation{})
			must(t, err)
			evilTree = heldTree(t, StoreDir(backups, "box"), []tfile{{"../escape", []byte("x")}})
			before := files(t, StoreDir(backups, "box"))
			_, _, _, err = ingestGen(t, backups, 1, tt.mut)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMissing) || strings.Contains(err.Error(), "repair") {
				t.Fatalf("the box's fault is said to be the store's: %v", err)
			}
			if entries, _ := os.ReadDir(backups); len(entries) != 2 {
				t.Fatalf("the backups directory holds %v", entries)
			}
			if after := files(t, StoreDir(backups, "box")); strings.Join(after, " ") != strings.Join(before, " ") {
				t.Fatalf("the store changed:\n%v\nwas\n%v", after, before)
			}
			restored(t, backups, dir0, 0)
		})
	}
}

// evilTree is a tree the store holds that names "../escape".
var evilTree []chunkwire.ID

// heldTree puts the tree of files and its chunks into the store in dir.
func heldTree(t testing.TB, dir string, files []tfile) []chunkwire.ID {
	s := openStore(t, dir)
	w, err := s.NewWriter()
	must(t, err)
	tree, _, err := snaptree.Encode(bytes.NewReader(rawTar(files)), func(id snaptree.ID, data []byte) error {
		_, err := w.Put(id, data)
		return err
	})
	must(t, err)
	must(t, w.Commit())
	return tree
}

func rawTar(files []tfile) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(gzipTar(files)))
	if err != nil {
		panic(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil && !errors.Is(err, io.EOF) {
		panic(err)
	}
	return data
}

// TestHeldOfAMillionChunks: what the host sends the agent for a store of a
// million chunks is 8 MiB, and building it allocates twice that (beside
// the 52 MB index, within the 128 MiB the issue allows).
func TestHeldOfAMillionChunks(t *testing.T) {
	const n = 1_000_000
	s := &Store{}
	s.idx.entries = make([]entry, n)
	for i := range s.idx.entries {
		binary.BigEndian.PutUint64(s.idx.entries[i].id[:], uint64(i)<<20)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	prefixes := make([]uint64, 0, n)
	for _, e := range s.idx.entries {
		prefixes = append(prefixes, chunkwire.Prefix(e.id))
	}
	var held bytes.Buffer
	held.Grow(64 + 8*len(prefixes))
	must(t, chunkwire.WriteHeld(&held, &chunkwire.Held{Prefixes: prefixes}))
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a million held chunks: %d bytes sent, %d bytes allocated (the index itself: %d bytes)", held.Len(), alloc, n*int(unsafe.Sizeof(entry{})))
	if held.Len() > 8*n+64 || alloc > 32<<20 { // 16 MB measured (24 MB under -race)
		t.Fatalf("%d bytes sent, %d allocated", held.Len(), alloc)
	}
}
