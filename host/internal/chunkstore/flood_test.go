package chunkstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// heapPeak samples the heap's live objects every millisecond until stop
// is called, which returns the most seen.
func heapPeak() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// floodFiles are files of chunks (perFile a file), as a tree lists them:
// a chunk under cdc.MinSize can only be a file's last, so the tiny ones
// are a file each.
func floodFiles(dir string, perFile int, chunks func(yield func([]byte) bool)) []knownFile {
	var out []knownFile
	for c := range chunks {
		if len(out) == 0 || len(out[len(out)-1].ids) == perFile*len(ID{}) {
			out = append(out, knownFile{name: fmt.Sprintf("%s/f%04d", dir, len(out))})
		}
		k := &out[len(out)-1]
		id := Sum(c)
		k.ids, k.size = append(k.ids, id[:]...), k.size+int64(len(c))
	}
	return out
}

// The flood: Y, floodN chunks of 8 bytes, and X, two random chunks of
// 1 MiB before every floodEvery of Y (so that O's packs are mostly X).
const (
	floodN     = 1_050_000
	floodEvery = 1 << 16
)

// flood yields the chunks of O after the good box's, in order; y says
// whether one is of Y.
func flood(yield func(c []byte, y bool) bool) {
	for i := range floodN {
		if i%floodEvery == 0 {
			for j := range 2 {
				if !yield(chunk("x", 2*(i/floodEvery)+j, MaxChunk, true), false) {
					return
				}
			}
		}
		if !yield(tinyChunk('y', i, 8), true) {
			return
		}
	}
}

// floodOf yields the chunks of flood that are (y) or are not of Y.
func floodOf(y bool) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		if y {
			for i := range floodN {
				if !yield(tinyChunk('y', i, 8)) {
					return
				}
			}
			return
		}
		for i := range 2 * ((floodN + floodEvery - 1) / floodEvery) {
			if !yield(chunk("x", i, MaxChunk, true)) {
				return
			}
		}
	}
}

// TestTinyChunkFlood is the cases 1 to 3 through the store: a
// hostile backup O of a million tiny chunks (Y, more than maxPackEntries)
// between large ones (X), after a copy of the good box's chunks; then a
// good backup G of that box (its chunks all held: in O's packs); then a
// hostile backup H naming only Y. Writing O holds the host's heap within
// the index and a bounded window, and the store opens after it (no pack
// over maxPackEntries). Deleting O then repacks Y and G's chunks (O's
// packs are mostly X): the store still opens, G verifies with every
// chunk read and restores, and repair has nothing to drop.
func TestTinyChunkFlood(t *testing.T) {
	if runPlain(t) {
		return
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(40 << 20)) // as the host runs
	backups := t.TempDir()
	storeDir := StoreDir(backups, "box")
	gChunks, gOrder, gTrees := boxChunks(t, 0)
	s := openStore(t, storeDir)

	runtime.GC()
	stop := heapPeak()
	start := time.Now()
	w, err := s.NewWriter()
	must(t, err)
	for _, id := range gOrder {
		_, err := w.addVerified(id, gChunks[id], nil)
		must(t, err)
	}
	xs := 0
	for c, y := range flood {
		if _, err := w.addVerified(Sum(c), c, nil); err != nil {
			t.Fatal(err)
		}
		if !y {
			xs++
		}
	}
	must(t, w.Commit())
	peak, took := stop(), time.Since(start)
	s.Close()
	s = openStore(t, storeDir)
	index := uint64(s.Len()) * uint64(unsafe.Sizeof(entry{}))
	t.Logf("wrote %d chunks in %v: peak heap %.1f MiB, of which the index %.1f MiB (%d bytes a chunk)",
		s.Len(), took.Round(time.Millisecond), float64(peak)/(1<<20), float64(index)/(1<<20), unsafe.Sizeof(entry{}))
	if peak > index+floodWindow {
		t.Errorf("peak heap %d bytes: more than the index's %d and %d", peak, index, floodWindow)
	}
	checkPacks(t, s, storeDir) // Open refused a pack over maxPackEntries

	// O's tree (all of X and Y) and H's (Y), both written in one go.
	ws := boxParts(0)[boxlayout.PartWorkspace]
	ys := floodFiles("y", 1, floodOf(true))
	w, err = s.NewWriter()
	must(t, err)
	treeO := encodeTree(t, w, ws, append(floodFiles("x", 4096, floodOf(false)), ys...))
	treeH := encodeTree(t, w, ws, ys)
	must(t, w.Commit())
	s.Close()
	dirO := publishTrees(t, backups, -1, map[string][]ID{boxlayout.PartRootfs: gTrees[boxlayout.PartRootfs], boxlayout.PartWorkspace: treeO})
	dirG, _ := snapshot(t, backups, 0)
	publishTrees(t, backups, 1, map[string][]ID{boxlayout.PartRootfs: gTrees[boxlayout.PartRootfs], boxlayout.PartWorkspace: treeH})
	must(t, os.RemoveAll(dirO))
	rep, err := Collect(context.Background(), backups, "box", trust)
	must(t, err)
	t.Logf("collected after deleting O: %+v", rep)
	if rep.PacksRepacked == 0 || rep.ChunksRemoved < xs {
		t.Fatalf("collection %+v: want O's packs repacked and its %d large chunks removed", rep, xs)
	}
	recG, err := Load(dirG, trust)
	must(t, err)
	good := func() {
		t.Helper()
		s, err := Open(storeDir)
		must(t, err)
		defer s.Close()
		checkPacks(t, s, storeDir)
		must(t, s.Verify(context.Background(), recG, true))
		stagesAs(t, s, recG, 0)
	}
	good()
	dirs, recs, err := Backups(backups, "box", trust)
	must(t, err)
	var kept []Kept
	for i := range dirs {
		kept = append(kept, Kept{dirs[i], recs[i]})
	}
	rrep, err := Repair(context.Background(), storeDir, kept, false)
	must(t, err)
	if len(rrep.Losses) != 0 || len(rrep.Unreadable) != 0 {
		t.Fatalf("repair after the collection: %+v", rrep)
	}
	good()
}

// floodWindow is what a write may hold beside the index: the chunks
// added since the last merge, the open pack's header and the buffers.
const floodWindow = 48 << 20

// checkPacks checks that no pack of s (in dir) holds more than
// maxPackEntries chunks.
func checkPacks(t *testing.T, s *Store, dir string) {
	t.Helper()
	packs, err := s.listIDs(packsDir, packExt)
	must(t, err)
	for _, p := range packs {
		n, err := s.eachPackEntry(p, func(packEntry) error { return nil })
		must(t, err)
		if n > maxPackEntries {
			t.Fatalf("pack %s of %s holds %d chunks", p, dir, n)
		}
	}
}
