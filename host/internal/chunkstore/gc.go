package chunkstore

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
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
	s.idx.fold()
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

func cmpID(e entry, id ID) int { return cmpIDs(&e.id, &id) }

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
// kept, then the old indexes, then the packs no longer named. Before
// anything is removed the new index and packs are read back (checkIndex):
// if any live chunk is not found there, GC removes what it wrote and
// fails, the store as it was.
func (s *Store) GC(m *Marks) (GCReport, error) {
	plan, err := s.planGC(m)
	rep := GCReport{ChunksRemoved: plan.rep.ChunksRemoved, PacksRepacked: plan.rep.PacksRepacked}
	drop := plan.drop
	if err != nil || (rep.ChunksRemoved == 0 && len(plan.orphans) == 0) {
		return rep, err
	}
	before, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return rep, err
	}
	w, err := s.NewWriter()
	if err != nil {
		return rep, err
	}
	defer w.enc.Close()
	// kept are the live chunks of the packs kept, by position in the
	// index: 4 bytes each, their index group written from them.
	var kept []int32
	for i, e := range s.idx.entries {
		switch {
		case !m.live(i):
		case drop[e.pack]:
			if err := w.copyLive(e.id); err != nil {
				return rep, errors.Join(fmt.Errorf("repacking: %w", err), w.Abort())
			}
		default:
			kept = append(kept, int32(i))
		}
	}
	if w.pack != nil {
		if err := w.closePack(); err != nil {
			return rep, errors.Join(fmt.Errorf("repacking: %w", err), w.Abort())
		}
	}
	for _, p := range w.done {
		if fi, err := os.Stat(s.packPath(p)); err == nil {
			rep.BytesFreed -= fi.Size()
		}
	}
	id, err := s.writeKeptIndex(kept, w.done)
	if err == nil {
		crashPoint("new-index-published")
		if err = s.checkIndex(id, m, w.done); err != nil {
			err = fmt.Errorf("collecting garbage: the new index, read back, %w; nothing was removed", err)
			_ = removeFile(s.indexPath(id))
		}
	}
	if err != nil {
		was := map[ID]bool{}
		for _, p := range before {
			was[p] = true
		}
		for _, p := range w.done {
			if !was[p] {
				_ = removeFile(s.packPath(p))
			}
		}
		w.done = nil
		return rep, errors.Join(err, s.load())
	}
	return s.sweep(id, rep)
}

// writeKeptIndex publishes an index naming the chunks at positions kept
// of the packs GC keeps and every entry of the packs fresh.
func (s *Store) writeKeptIndex(kept []int32, fresh []ID) (ID, error) {
	x := s.idx.entries
	slices.SortFunc(kept, func(a, b int32) int {
		if c := cmp.Compare(x[a].pack, x[b].pack); c != 0 {
			return c
		}
		return cmp.Compare(x[a].off, x[b].off)
	})
	iw, err := s.newIndexWriter()
	if err != nil {
		return ID{}, err
	}
	for len(kept) > 0 {
		pack := x[kept[0]].pack
		n := 1
		for n < len(kept) && x[kept[n]].pack == pack {
			n++
		}
		if err := iw.group(s.idx.packs[pack], uint32(n)); err != nil {
			return ID{}, err
		}
		for _, i := range kept[:n] {
			e := x[i]
			if err := iw.entry(packEntry{e.id, e.off, e.slen, e.rlen, e.zstd}); err != nil {
				return ID{}, err
			}
		}
		kept = kept[n:]
	}
	for _, p := range fresh {
		if err := iw.addPack(s, p); err != nil {
			return ID{}, err
		}
	}
	return iw.publish()
}

// checkIndex reads the index id back alone, as Open reads an index, and
// checks that it names every chunk m marks live, each in a pack on disk;
// that each pack of fresh hashes to its name; and that the index lists
// each fresh pack's header as it is. It holds one bit per chunk.
func (s *Store) checkIndex(id ID, m *Marks, fresh []ID) error {
	packs, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return err
	}
	onDisk := map[ID]bool{}
	for _, p := range packs {
		onDisk[p] = true
	}
	isFresh := map[ID]bool{}
	for _, p := range fresh {
		if err := s.checkPackHash(p); err != nil {
			return err
		}
		isFresh[p] = true
	}
	found := make([]uint64, len(m.bits))
	var hdr *packHeader
	var hdrPack ID
	endHeader := func() error {
		if hdr == nil {
			return nil
		}
		_, err := hdr.next()
		hdr.Close()
		hdr = nil
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("lists fewer entries of pack %s than its header (%v)", hdrPack, err)
		}
		return nil
	}
	defer func() { _ = endHeader() }()
	err = s.readIndex(id, func(pack ID, entries []packEntry) error {
		if !onDisk[pack] {
			return fmt.Errorf("names pack %s, which is not on disk", pack)
		}
		if hdr == nil || hdrPack != pack {
			if err := endHeader(); err != nil {
				return err
			}
			if isFresh[pack] {
				if hdr, err = s.openPackHeader(pack); err != nil {
					return err
				}
				hdrPack = pack
			}
		}
		for _, e := range entries {
			if hdr != nil {
				if he, err := hdr.next(); err != nil || he != e {
					return fmt.Errorf("lists chunk %s of pack %s where its header has another (%v)", e.id, pack, err)
				}
			}
			if i, ok := slices.BinarySearchFunc(s.idx.entries, e.id, cmpID); ok {
				found[i/64] |= 1 << (i % 64)
			}
		}
		return nil
	})
	if err == nil {
		err = endHeader()
	}
	if err != nil {
		return err
	}
	for i, live := range m.bits {
		if lost := live &^ found[i]; lost != 0 {
			return fmt.Errorf("lacks live chunk %s", s.idx.entries[i*64+bits.TrailingZeros64(lost)].id)
		}
	}
	return nil
}

// checkPackHash reads pack p and checks it hashes to its name.
func (s *Store) checkPackHash(p ID) error {
	f, err := os.Open(s.packPath(p))
	if err != nil {
		return fmt.Errorf("reading back pack: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading back pack %s: %w", s.packPath(p), err)
	}
	if ID(h.Sum(nil)) != p {
		return fmt.Errorf("%w: pack %s does not hash to its name", ErrCorrupt, s.packPath(p))
	}
	return nil
}

// copyLive reads a live chunk's stored bytes, checks them (decompressed
// within its length and re-hashed; a corrupt one set aside, as every
// read does) and writes them as they are to w's pack: a repack
// compresses nothing again, so its size is known before (planGC).
func (w *Writer) copyLive(id ID) error {
	blob, data, l, err := w.s.read(id, nil)
	if err = w.s.damaged(id, err); err != nil {
		return err
	}
	if _, err := w.write(id, data, blob, l.zstd); err != nil {
		return err
	}
	if w.full() {
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

// sweep removes the index files but id, then every pack id does not
// name.
func (s *Store) sweep(id ID, rep GCReport) (GCReport, error) {
	oldIndexes, err := s.listIDs(indexDir, indexExt)
	if err != nil {
		return rep, err
	}
	if err := s.removeIndexes(oldIndexes, id); err != nil {
		return rep, err
	}
	keep := map[ID]bool{}
	if err := s.readIndex(id, func(pack ID, _ []packEntry) error {
		keep[pack] = true
		return nil
	}); err != nil {
		return rep, err
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
