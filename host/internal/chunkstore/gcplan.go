package chunkstore

import (
	"os"
)

// gcPlan is what a GC of some marks does, worked out before anything is
// written: the packs it drops (their live chunks copied into new packs)
// and the report it will return. GC follows it, and PlanGC returns its
// report, so a dry run and the collection say the same.
type gcPlan struct {
	drop    []bool
	orphans []ID
	rep     GCReport
}

// PlanGC is the report GC(m) would return, with nothing written: the
// chunks and packs it would remove, the packs it would repack and the
// bytes it would free (the packs no longer named, less the new packs'
// exact size: a repack copies each live chunk's stored bytes as they
// are).
func (s *Store) PlanGC(m *Marks) (GCReport, error) {
	p, err := s.planGC(m)
	return p.rep, err
}

// planGC works out GC(m): a pack whose live chunks are under repackBelow
// of its stored bytes is dropped (its live chunks repacked); a pack on
// disk the new index would not name is removed.
func (s *Store) planGC(m *Marks) (gcPlan, error) {
	var p gcPlan
	type packUse struct{ live, total int64 }
	use := make([]packUse, len(s.idx.packs))
	for i, e := range s.idx.entries {
		use[e.pack].total += int64(e.slen)
		if m.live(i) {
			use[e.pack].live += int64(e.slen)
		} else {
			p.rep.ChunksRemoved++
		}
	}
	p.drop = make([]bool, len(s.idx.packs))
	for n, u := range use {
		p.drop[n] = float64(u.live) < repackBelow*float64(u.total)
		if p.drop[n] && u.live > 0 {
			p.rep.PacksRepacked++
		}
	}
	var err error
	if p.orphans, err = s.unindexedPacks(); err != nil || (p.rep.ChunksRemoved == 0 && len(p.orphans) == 0) {
		return p, err
	}
	// The new index names the packs of the live chunks kept in place;
	// the live chunks of dropped packs go into new packs, cut as the
	// writer cuts them.
	named := make([]bool, len(s.idx.packs))
	var fresh repackSize
	for i, e := range s.idx.entries {
		switch {
		case !m.live(i):
		case p.drop[e.pack]:
			fresh.add(e.slen)
		default:
			named[e.pack] = true
		}
	}
	fresh.close()
	pos := make(map[ID]int, len(s.idx.packs))
	for n, id := range s.idx.packs {
		pos[id] = n
	}
	onDisk, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return p, err
	}
	for _, id := range onDisk {
		if n, ok := pos[id]; ok && named[n] {
			continue
		}
		if fi, err := os.Lstat(s.packPath(id)); err == nil {
			p.rep.BytesFreed += fi.Size()
		}
		p.rep.PacksRemoved++
	}
	p.rep.BytesFreed -= fresh.bytes
	return p, nil
}

// repackSize adds up the packs a repack writes: blobs, then a header of
// packEntrySize bytes an entry, the count and the magic; a pack closed
// at packTarget bytes of blobs or maxPackEntries entries (Writer.full).
type repackSize struct {
	n, entries int64
	bytes      int64
}

func (r *repackSize) add(slen uint32) {
	r.n += int64(slen)
	if r.entries++; r.n >= packTarget || r.entries >= maxPackEntries {
		r.close()
	}
}

func (r *repackSize) close() {
	if r.entries == 0 {
		return
	}
	r.bytes += r.n + r.entries*packEntrySize + 4 + int64(len(packMagic))
	r.n, r.entries = 0, 0
}
