package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
)

// The "store-chunks" row's matrix cases run with the cap lowered to the
// chunks the case's store holds plus storeRoom[case] (the real cap's
// store takes millions of chunks: TestStoreCapHeap writes it).
var storeRoom = map[string]int64{
	"the store full, one new chunk":         0,
	"100,000 tiny files past 1,000 of room": 1000,
}

func init() {
	limitCases["store-chunks"] = []streamCase{
		{"the store full, one new chunk", func(b *hostileBox) error {
			return b.FileOf("etc/new", 100, b.Send(content(100, 9)))
		}, "the machine's chunk store would hold more than"},
		{"100,000 tiny files past 1,000 of room", tinyFiles(100_000, 's'), "the machine's chunk store would hold more than"},
	}
}

// capStore lowers maxStoreChunks to the chunks the store in storeDir
// holds plus the room of case name, if it has one; the returned func
// puts it back.
func capStore(t *testing.T, storeDir, name string) func() {
	room, ok := storeRoom[name]
	if !ok {
		return func() {}
	}
	s := openStore(t, storeDir)
	n := int64(s.Len())
	s.Close()
	maxStoreChunks = n + room
	return func() { maxStoreChunks = storeChunks }
}

// storeLen is the chunks the store in dir holds, its index let go of.
func storeLen(t *testing.T, dir string) int {
	s, err := Open(dir)
	must(t, err)
	defer s.Close()
	return s.Len()
}

// tinyFiles is a rootfs of n files of 8 bytes, each its own chunk (a
// file's last: under the minimum), sent without the box keeping a set
// of what it sent (each is new: a chunk of seed and i).
func tinyFiles(n int, seed byte) func(b *hostileBox) error {
	return func(b *hostileBox) error {
		for i := range n {
			data := tinyChunk(seed, i, 8)
			id := Sum(data)
			err := b.Chunk(chunkwire.Chunk{ID: id, Plain: uint32(len(data)), Stored: data})
			b.Entry('0', fmt.Sprintf("f%07d", i), int64(len(data)), nil, 1)
			b.Raw(id[:])
			if err != nil {
				return err
			}
		}
		return b.End()
	}
}

// capFiles and capSlack: TestStoreCapHeap's snapshot brings capFiles
// tiny files into a store filled to the cap but for them and capSlack
// (the tree's own chunks, about one per 64 KiB of tree). Each file its
// own chunk is the costliest shape a snapshot up to the cap has: a
// million entries to check, a million chunks added (10,000 files into
// a store filled first peaked at 71 MiB; this one at 135.5 MiB while
// the tree's check kept every name, 111.5 MiB since).
const (
	capFiles = 990_000
	capSlack = 8000
)

// TestStoreCapHeap is the real cap's heap: a store holding an honest
// backup and filled with tiny chunks to storeChunks less a snapshot of
// capFiles tiny files, which is then published (the store at the cap
// but for the tree's slack), the host's peak heap at most 128 MiB while
// it runs (the box's side, in this process, counted); a snapshot of one
// more new chunk than the store has room for is then
// refused with an error naming the cap and what frees chunks, the
// store's files as they were, and the earlier backups load and the
// honest one verifies with every chunk read.
func TestStoreCapHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a store of a million chunks")
	}
	if runPlain(t) {
		return
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(40 << 20)) // as the host runs
	ctx := context.Background()
	backups := t.TempDir()
	storeDir := StoreDir(backups, "box")
	ws := boxParts(0)[boxlayout.PartWorkspace]
	dirG, recG, err := Ingest(ctx, backups, meta(0), chunkAgent(boxParts(0), agentMutation{}, nil), nil)
	must(t, err)

	// The store filled to the cap but for the hostile snapshot (opened
	// here without openStore, whose cleanup would keep its index live).
	s, err := Open(storeDir)
	must(t, err)
	fill := storeChunks - s.Len() - capFiles - capSlack
	start := time.Now()
	w, err := s.NewWriter()
	must(t, err)
	for i := range fill {
		c := tinyChunk('p', i, 8)
		_, err := w.addVerified(Sum(c), c, nil)
		must(t, err)
	}
	must(t, w.Commit())
	s.Close()
	s, w = nil, nil
	t.Logf("filled the store with %d tiny chunks in %v", fill, time.Since(start).Round(time.Millisecond))

	var sent int64
	resetPeakRSS()
	start = time.Now()
	var dirH string
	heap, err := peakHeap(func() error {
		var err error
		dirH, _, err = Ingest(ctx, backups, meta(1), hostileSource(ws, tinyFiles(capFiles, 'h'), &sent), nil)
		return err
	})
	if err != nil {
		t.Fatalf("the snapshot up to the cap: %v", err)
	}
	held := storeLen(t, storeDir)
	t.Logf("published a snapshot of %d tiny files (%d bytes from the box) in %v: the store holds %d chunks (the cap %d), peak heap %.1f MiB, peak RSS %s",
		capFiles, sent, time.Since(start).Round(time.Millisecond), held, storeChunks, heap, peakRSS())
	if held > storeChunks || held < storeChunks-capSlack {
		t.Fatalf("the store holds %d chunks: want it at the cap %d, within %d", held, storeChunks, capSlack)
	}
	if heap > 128 {
		t.Errorf("peak heap %.1f MiB writing up to the cap, over the 128 MiB bound", heap)
	}

	// One more new chunk than the cap.
	before := files(t, storeDir)
	room := storeChunks - held
	start = time.Now()
	heap, err = peakHeap(func() error {
		_, _, err := Ingest(ctx, backups, meta(2), hostileSource(ws, tinyFiles(room+1, 'o'), &sent), nil)
		return err
	})
	t.Logf("a snapshot of %d new chunks into a store with room for %d: %v in %v, peak heap %.1f MiB", room+1, room, err,
		time.Since(start).Round(time.Millisecond), heap)
	if !errors.Is(err, backup.ErrLimit) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d chunks", storeChunks)) ||
		!strings.Contains(err.Error(), "backups delete") {
		t.Fatalf("err = %v, want the store's cap of %d named with what frees chunks", err, storeChunks)
	}
	if heap > 128 {
		t.Errorf("peak heap %.1f MiB refusing a snapshot past the cap, over the 128 MiB bound", heap)
	}
	if after := files(t, storeDir); !slices.Equal(after, before) {
		t.Fatalf("a refused snapshot changed the store:\n%v\nwas\n%v", after, before)
	}
	if entries, _ := os.ReadDir(backups); len(entries) != 3 {
		t.Fatalf("the backups directory holds %v, want the store and the two backups", entries)
	}
	if _, err := Load(dirH, trust); err != nil {
		t.Fatalf("the backup at the cap does not load: %v", err)
	}
	s = openStore(t, storeDir)
	if _, err := Load(dirG, trust); err != nil {
		t.Fatal(err)
	}
	must(t, s.Verify(ctx, recG, true))
}
