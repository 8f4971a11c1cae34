package chunkstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Marks is the set of live chunks of a GC: one bit per held chunk.
type Marks struct {
	s    *Store
	bits []uint64
}

// NewMarks starts marking live chunks.
func (s *Store) NewMarks() *Marks {
	s.idx.merge()
	return &Marks{s: s, bits: make([]uint64, (len(s.idx.entries)+63)/64)}
}

// Mark records id as live; it reports false when the store does not hold
// it (a backup that needs a missing chunk).
func (m *Marks) Mark(id ID) bool {
	i, ok := slices.BinarySearchFunc(m.s.idx.entries, id, cmpID)
	if ok {
		m.bits[i/64] |= 1 << (i % 64)
	}
	return ok
}

// Marked reports whether id was marked.
func (m *Marks) Marked(id ID) bool {
	i, ok := slices.BinarySearchFunc(m.s.idx.entries, id, cmpID)
	return ok && m.bits[i/64]&(1<<(i%64)) != 0
}

func cmpID(e entry, id ID) int { return bytes.Compare(e.id[:], id[:]) }

func (m *Marks) live(i int) bool { return m.bits[i/64]&(1<<(i%64)) != 0 }

// GCReport says what a GC removed.
type GCReport struct {
	ChunksRemoved int
	PacksRemoved  int
	PacksRepacked int
	// BytesFreed is the stored size of the packs removed, less what
	// repacking wrote again.
	BytesFreed int64
}

// repackBelow is the live fraction of a pack's stored bytes under which
// GC copies its live chunks into a new pack and removes it.
const repackBelow = 0.5

// GC removes every chunk m did not mark: packs with no live chunk go,
// packs mostly dead are repacked, and unindexed packs (an interrupted
// write's) go too. The steps are ordered so that a crash at any point
// loses nothing live: new packs, then a new index naming only what is
// kept, then the old indexes, then the packs no longer named.
func (s *Store) GC(m *Marks) (GCReport, error) {
	var rep GCReport
	type packUse struct{ live, total int64 }
	use := make([]packUse, len(s.idx.packs))
	for i, e := range s.idx.entries {
		use[e.pack].total += int64(e.slen)
		if m.live(i) {
			use[e.pack].live += int64(e.slen)
		} else {
			rep.ChunksRemoved++
		}
	}
	drop := make([]bool, len(s.idx.packs))
	for n, u := range use {
		drop[n] = float64(u.live) < repackBelow*float64(u.total)
		if drop[n] && u.live > 0 {
			rep.PacksRepacked++
		}
	}
	orphans, err := s.unindexedPacks()
	if err != nil || (rep.ChunksRemoved == 0 && len(orphans) == 0) {
		return rep, err
	}
	w, err := s.NewWriter()
	if err != nil {
		return rep, err
	}
	var groups []packGroup
	byPack := map[uint32][]packEntry{}
	for i, e := range s.idx.entries {
		switch {
		case !m.live(i):
		case drop[e.pack]:
			if err := w.copyLive(e.id); err != nil {
				return rep, errors.Join(fmt.Errorf("repacking: %w", err), w.Abort())
			}
		default:
			byPack[e.pack] = append(byPack[e.pack], packEntry{e.id, e.off, e.slen, e.rlen, e.zstd})
		}
	}
	if w.pack != nil {
		if err := w.closePack(); err != nil {
			return rep, errors.Join(fmt.Errorf("repacking: %w", err), w.Abort())
		}
	}
	w.enc.Close()
	for n, entries := range byPack {
		slices.SortFunc(entries, func(a, b packEntry) int { return int(a.off) - int(b.off) })
		groups = append(groups, packGroup{s.idx.packs[n], entries})
	}
	groups = append(groups, w.done...)
	for _, g := range w.done {
		for _, e := range g.entries {
			rep.BytesFreed -= int64(e.slen)
		}
	}
	return s.sweep(groups, rep)
}

// copyLive reads a live chunk (re-hashing it) and writes it to w's pack.
func (w *Writer) copyLive(id ID) error {
	data, err := w.s.Read(id, w.buf)
	if err != nil {
		return err
	}
	if _, err := w.write(id, bytes.Clone(data), nil, false); err != nil {
		return err
	}
	if w.pack.n >= packTarget {
		return w.closePack()
	}
	return nil
}

// unindexedPacks are packs on disk that no index names.
func (s *Store) unindexedPacks() ([]ID, error) {
	onDisk, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return nil, err
	}
	named := map[ID]bool{}
	for _, p := range s.idx.packs {
		named[p] = true
	}
	for _, p := range s.missingPacks {
		named[p] = true
	}
	var out []ID
	for _, p := range onDisk {
		if !named[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// sweep publishes the index of what is kept, then removes every pack it
// does not name.
func (s *Store) sweep(groups []packGroup, rep GCReport) (GCReport, error) {
	oldIndexes, err := s.listIDs(indexDir, indexExt)
	if err != nil {
		return rep, err
	}
	if err := s.replaceIndex(groups, oldIndexes); err != nil {
		return rep, err
	}
	keep := map[ID]bool{}
	for _, g := range groups {
		keep[g.pack] = true
	}
	onDisk, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return rep, err
	}
	s.closeFiles()
	for _, p := range onDisk {
		if keep[p] {
			continue
		}
		if fi, err := os.Lstat(s.packPath(p)); err == nil {
			rep.BytesFreed += fi.Size()
		}
		if err := removeFile(s.packPath(p)); err != nil {
			return rep, fmt.Errorf("removing pack: %w", err)
		}
		rep.PacksRemoved++
		crashPoint("pack-removed")
	}
	return rep, s.load()
}
