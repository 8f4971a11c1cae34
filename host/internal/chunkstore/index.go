package chunkstore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// loc is where a chunk is: a pack (by number), its blob's offset and
// stored length, its plaintext length and whether the blob is zstd.
type loc struct {
	pack       uint32
	off        uint32
	slen, rlen uint32
	zstd       bool
}

type entry struct {
	id ID
	loc
}

// index maps chunk ids to their packs. The chunks loaded are a sorted
// slice, entries (52 bytes each: a million chunks in about 50 MiB).
// Chunks added since sit in a small map, recent, until there are
// mergeEvery of them, then move to added: sorted too, but in fixed
// blocks, so that it grows without the copy of everything (twice the
// index, at the moment of growing) that a slice's growth makes.
type index struct {
	packs   []ID // pack number → pack id
	entries []entry
	added   blocks
	recent  map[ID]loc
	scratch []entry // merge's
	// bad are the copies of chunks set aside (quarantine.go), never
	// found; badSize their plaintext lengths.
	bad     map[badKey]bool
	badSize map[ID]int64
}

const mergeEvery = 1 << 16

func (x *index) find(id ID) (loc, bool) {
	i, ok := slices.BinarySearchFunc(x.entries, id, cmpID)
	if ok && x.good(id, x.entries[i].loc) {
		return x.entries[i].loc, true
	}
	if x.added.n > 0 {
		if i, ok := x.added.search(id); ok && x.good(id, x.added.at(i).loc) {
			return x.added.at(i).loc, true
		}
	}
	l, ok := x.recent[id]
	if ok && x.good(id, l) {
		return l, true
	}
	return loc{}, false
}

// len is the number of chunks held.
func (x *index) len() int { return len(x.entries) + x.added.n + len(x.recent) }

// add records a chunk the index does not hold yet.
func (x *index) add(id ID, l loc) {
	if x.recent == nil {
		x.recent = map[ID]loc{}
	}
	x.recent[id] = l
	if len(x.recent) >= mergeEvery {
		x.merge()
	}
}

// merge moves the recent chunks into added, in place.
func (x *index) merge() {
	if len(x.recent) == 0 {
		return
	}
	add := x.scratch[:0]
	for id, l := range x.recent {
		add = append(add, entry{id, l})
	}
	slices.SortFunc(add, cmpEntry)
	r := &x.added
	old := r.n
	r.grow(old + len(add))
	i, j := old-1, len(add)-1
	for k := r.n - 1; j >= 0; k-- {
		if i >= 0 && cmpEntry(*r.at(i), add[j]) > 0 {
			*r.at(k) = *r.at(i)
			i--
		} else {
			*r.at(k) = add[j]
			j--
		}
	}
	clear(x.recent)
	x.scratch = add[:0]
}

// fold makes every chunk held one sorted slice, entries (GC's marks are
// positions in it).
func (x *index) fold() {
	x.merge()
	if x.added.n == 0 {
		x.entries = x.dropBad(x.entries)
		return
	}
	all := make([]entry, 0, len(x.entries)+x.added.n)
	x.each(func(e *entry) { all = append(all, *e) })
	x.entries, x.added, x.scratch = x.dropBad(all), blocks{}, nil
}

// each calls fn with every chunk of entries and added, in order; the
// recent ones are merged first.
func (x *index) each(fn func(e *entry)) {
	x.merge()
	i, j := 0, 0
	for i < len(x.entries) || j < x.added.n {
		if j == x.added.n || (i < len(x.entries) && cmpEntry(x.entries[i], *x.added.at(j)) < 0) {
			fn(&x.entries[i])
			i++
		} else {
			fn(x.added.at(j))
			j++
		}
	}
}

// blocks is a sorted run of n entries in blocks of blockLen.
type blocks struct {
	b [][]entry
	n int
}

const (
	blockShift = 12
	blockLen   = 1 << blockShift // 208 KiB of entries
)

func (r *blocks) at(i int) *entry { return &r.b[i>>blockShift][i&(blockLen-1)] }

// grow makes room for n entries.
func (r *blocks) grow(n int) {
	for len(r.b)*blockLen < n {
		r.b = append(r.b, make([]entry, blockLen))
	}
	r.n = n
}

func (r *blocks) search(id ID) (int, bool) {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpIDs(&r.at(m).id, &id) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < r.n && r.at(lo).id == id
}

func cmpEntry(a, b entry) int { return cmpIDs(&a.id, &b.id) }

// cmpIDs orders ids by their bytes: the first eight as one number (ids
// are hashes: they almost always differ there), then the rest.
func cmpIDs(a, b *ID) int {
	if x, y := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8]); x != y {
		if x < y {
			return -1
		}
		return 1
	}
	return bytes.Compare(a[8:], b[8:])
}

// Sizes of the on-disk entries.
const (
	packEntrySize  = 32 + 4 + 4 + 1
	indexEntrySize = packEntrySize + 4
	// maxPackEntries is the most entries a pack holds: the writer and
	// GC's repack close a pack at it (as at packTarget bytes), and the
	// index loader and Repair refuse a pack or index group over it.
	maxPackEntries = 1 << 20
	// indexBatch is how many entries readIndex hands over at a time.
	indexBatch = 4096
)

var (
	packMagic  = []byte("HBXPACK1")
	indexMagic = []byte("HBXIDX01")
)

// packEntry is one blob of a pack, as its header and the index record it.
type packEntry struct {
	id         ID
	off        uint32
	slen, rlen uint32
	zstd       bool
}

func (e packEntry) check() error {
	switch {
	case e.rlen > MaxChunk || e.slen > MaxChunk:
		return fmt.Errorf("chunk %s: %d bytes stored, %d plain, over the limit of %d", e.id, e.slen, e.rlen, MaxChunk)
	case !e.zstd && e.slen != e.rlen:
		return fmt.Errorf("chunk %s: stored uncompressed in %d bytes but %d long", e.id, e.slen, e.rlen)
	}
	return nil
}

func (e packEntry) appendTo(b []byte, withOffset bool) []byte {
	b = append(b, e.id[:]...)
	if withOffset {
		b = binary.LittleEndian.AppendUint32(b, e.off)
	}
	b = binary.LittleEndian.AppendUint32(b, e.slen)
	b = binary.LittleEndian.AppendUint32(b, e.rlen)
	var z byte
	if e.zstd {
		z = 1
	}
	return append(b, z)
}

func parsePackEntry(b []byte, withOffset bool) (packEntry, error) {
	var e packEntry
	copy(e.id[:], b)
	b = b[32:]
	if withOffset {
		e.off, b = binary.LittleEndian.Uint32(b), b[4:]
	}
	e.slen = binary.LittleEndian.Uint32(b)
	e.rlen = binary.LittleEndian.Uint32(b[4:])
	switch b[8] {
	case 0:
	case 1:
		e.zstd = true
	default:
		return e, fmt.Errorf("chunk %s: unknown compression %d", e.id, b[8])
	}
	return e, e.check()
}

// indexWriter writes an index file a pack at a time: group, then that
// many entries. It buffers at most a MiB.
type indexWriter struct {
	hf   *hashedFile
	buf  []byte
	left uint32 // entries the open group still expects
}

func (s *Store) newIndexWriter() (*indexWriter, error) {
	hf, err := createHashed(filepath.Join(s.dir, indexDir))
	if err != nil {
		return nil, err
	}
	return &indexWriter{hf: hf, buf: slices.Clone(indexMagic)}, nil
}

// group starts pack's group of n entries.
func (iw *indexWriter) group(pack ID, n uint32) error {
	if iw.left != 0 || n > maxPackEntries {
		return iw.hf.fail(fmt.Errorf("index group of pack %s: %d entries (%d of the last missing; at most %d)", pack, n, iw.left, maxPackEntries))
	}
	iw.buf = append(iw.buf, pack[:]...)
	iw.buf = binary.LittleEndian.AppendUint32(iw.buf, n)
	iw.left = n
	return nil
}

// entry adds e to the open group.
func (iw *indexWriter) entry(e packEntry) error {
	if iw.left == 0 {
		return iw.hf.fail(fmt.Errorf("index entry %s beyond its group", e.id))
	}
	iw.left--
	if iw.buf = e.appendTo(iw.buf, true); len(iw.buf) >= 1<<20 {
		if _, err := iw.hf.Write(iw.buf); err != nil {
			return iw.hf.fail(err)
		}
		iw.buf = iw.buf[:0]
	}
	return nil
}

// publish writes what is buffered and publishes the index.
func (iw *indexWriter) publish() (ID, error) {
	if iw.left != 0 {
		return ID{}, iw.hf.fail(fmt.Errorf("index group short of %d entries", iw.left))
	}
	if _, err := iw.hf.Write(iw.buf); err != nil {
		return ID{}, iw.hf.fail(err)
	}
	return iw.hf.publish(indexExt)
}

// packGroup is one pack's entries in an index file.
type packGroup struct {
	pack    ID
	entries []packEntry
}

// writeIndex publishes an index file naming groups and returns its id.
func (s *Store) writeIndex(groups []packGroup) (ID, error) {
	iw, err := s.newIndexWriter()
	if err != nil {
		return ID{}, err
	}
	for _, g := range groups {
		if err := iw.group(g.pack, uint32(len(g.entries))); err != nil {
			return ID{}, err
		}
		for _, e := range g.entries {
			if err := iw.entry(e); err != nil {
				return ID{}, err
			}
		}
	}
	return iw.publish()
}

// writePackIndex publishes an index file naming packs, each with the
// entries of its own header read back from disk (so checked as Repair
// checks it), in constant memory.
func (s *Store) writePackIndex(packs []ID) (ID, error) {
	iw, err := s.newIndexWriter()
	if err != nil {
		return ID{}, err
	}
	for _, p := range packs {
		if err := iw.addPack(s, p); err != nil {
			return ID{}, err
		}
	}
	return iw.publish()
}

// addPack adds pack p's group, from its header.
func (iw *indexWriter) addPack(s *Store, p ID) error {
	h, err := s.openPackHeader(p)
	if err != nil {
		return iw.hf.fail(err)
	}
	defer h.Close()
	if err := iw.group(p, h.n); err != nil {
		return err
	}
	for {
		e, err := h.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return iw.hf.fail(err)
		}
		if err := iw.entry(e); err != nil {
			return err
		}
	}
}

// readIndex streams the index file id, checking its hash and format, and
// calls group with each pack it names and that pack's entries, in batches
// of at most indexBatch (one pack may come in several calls).
func (s *Store) readIndex(id ID, group func(pack ID, entries []packEntry) error) error {
	path := s.indexPath(id)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	r := bufio.NewReaderSize(io.TeeReader(f, h), 1<<20)
	bad := func(what string) error {
		return fmt.Errorf("%w: index %s: %s (`hermes-box backups repair` rebuilds the index)", ErrCorrupt, path, what)
	}
	magic := make([]byte, len(indexMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, indexMagic) {
		return bad("not an index file")
	}
	var head [36]byte
	rec := make([]byte, indexEntrySize)
	entries := make([]packEntry, 0, indexBatch)
	for {
		if _, err := io.ReadFull(r, head[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return bad("truncated")
		}
		var pack ID
		copy(pack[:], head[:32])
		n := binary.LittleEndian.Uint32(head[32:])
		if n > maxPackEntries {
			return bad(fmt.Sprintf("pack %s with %d entries", pack, n))
		}
		entries = entries[:0]
		for range n {
			if _, err := io.ReadFull(r, rec); err != nil {
				return bad("truncated")
			}
			e, err := parsePackEntry(rec, true)
			if err != nil {
				return bad(err.Error())
			}
			if entries = append(entries, e); len(entries) == indexBatch {
				if err := group(pack, entries); err != nil {
					return err
				}
				entries = entries[:0]
			}
		}
		if err := group(pack, entries); err != nil {
			return err
		}
	}
	if !bytes.Equal(h.Sum(nil), id[:]) {
		return bad("content does not match its name")
	}
	return nil
}

// load reads every index file; chunks in packs that are not on disk are
// not held. The entries are read into the old index's array when it has
// room (a refused snapshot's reload reads the same chunks again), so the
// index is never held twice.
func (s *Store) load() error {
	s.closeFiles()
	old := s.idx.entries[:0]
	s.idx = index{}
	s.missingPacks = nil
	if err := s.idx.loadBad(s.dir); err != nil {
		return err
	}
	packIDs, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return err
	}
	onDisk := map[ID]bool{}
	for _, p := range packIDs {
		onDisk[p] = true
	}
	indexIDs, err := s.listIDs(indexDir, indexExt)
	if err != nil {
		return err
	}
	var size int64
	for _, id := range indexIDs {
		if fi, err := os.Stat(s.indexPath(id)); err == nil {
			size += fi.Size()
		}
	}
	if want := int(size / indexEntrySize); cap(old) >= want {
		s.idx.entries = old
	} else {
		old = nil
		s.idx.entries = make([]entry, 0, want)
	}
	number := map[ID]uint32{}
	missing := map[ID]bool{}
	for _, id := range indexIDs {
		err := s.readIndex(id, func(pack ID, entries []packEntry) error {
			if !onDisk[pack] {
				if !missing[pack] {
					missing[pack] = true
					s.missingPacks = append(s.missingPacks, pack)
				}
				return nil
			}
			n, ok := number[pack]
			if !ok {
				n = uint32(len(s.idx.packs))
				number[pack] = n
				s.idx.packs = append(s.idx.packs, pack)
			}
			for _, e := range entries {
				s.idx.entries = append(s.idx.entries, entry{e.id, loc{n, e.off, e.slen, e.rlen, e.zstd}})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(s.idx.entries, cmpEntry)
	// A copy set aside is never found: another copy (the one a later
	// snapshot stored) is.
	s.idx.entries = s.idx.dropBad(s.idx.entries)
	// A chunk in two packs (a GC interrupted after its new index) is
	// read from either: both copies hash to its id.
	s.idx.entries = slices.CompactFunc(s.idx.entries, func(a, b entry) bool { return a.id == b.id })
	return nil
}
