package chunkstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// RepairReport says what Repair found.
type RepairReport struct {
	Packs, Chunks int
	// Unreadable are packs whose header is damaged: left out of the index.
	Unreadable []string
	// Losses are what the kept backups lack in the rebuilt index.
	Losses []Loss
}

// Kept is a backup Repair must not take chunks from: its directory and
// its record (loaded, so signed).
type Kept struct {
	Dir string
	Rec *Record
}

// Loss is what one backup's part lacks in a rebuilt index: its tree
// (then nothing of the part can be listed), or files' chunks.
type Loss struct {
	Backup string `json:"backup"`
	Part   string `json:"part"`
	// Tree is set when chunks of the part's tree are lacking: Chunks
	// counts those and Files is empty.
	Tree bool `json:"tree"`
	// Files are the first maxLossFiles files that lack chunks, and
	// MoreFiles how many more do; Chunks counts their chunks lacking.
	Files     []string `json:"files"`
	MoreFiles int      `json:"more_files"`
	Chunks    int      `json:"chunks"`
	// SetAside counts those of Chunks that were found corrupt and set
	// aside (quarantine.go): the index lacks them before the repair too,
	// and a snapshot brings them again when the box still has them.
	SetAside int `json:"set_aside"`
}

// lost reports whether the rebuild itself would lose chunks of l: some
// it lacks are not set aside.
func (l Loss) lost() bool { return l.Chunks > l.SetAside }

// maxLossFiles bounds the files a Loss names.
const maxLossFiles = 20

// ErrWouldLose is a repair refused because the rebuilt index would lack
// chunks that kept backups need.
var ErrWouldLose = errors.New("the rebuilt index would lack chunks that backups need")

// Repair rebuilds the index of the store in dir from the packs' headers,
// whether or not the index loads. It reads every pack's header first
// and checks the backups kept against what they name: if any lacks a
// chunk there (a pack whose header is damaged, an index that named a
// pack no longer on disk), Repair changes nothing and returns the report
// with an ErrWouldLose error, unless force. Then it publishes one new
// index naming every readable pack and removes the old index files (a
// crash in between leaves two indexes that agree).
func Repair(ctx context.Context, dir string, kept []Kept, force bool) (RepairReport, error) {
	var rep RepairReport
	s, err := open(dir, false)
	if err != nil {
		return rep, err
	}
	defer s.Close()
	packs, err := s.listIDs(packsDir, packExt)
	if err != nil {
		return rep, err
	}
	oldIndexes, err := s.listIDs(indexDir, indexExt)
	if err != nil {
		return rep, err
	}
	readable, err := s.loadHeaders(packs, &rep)
	if err != nil {
		return rep, err
	}
	for _, k := range kept {
		losses, err := s.losses(ctx, k)
		if err != nil {
			return rep, err
		}
		rep.Losses = append(rep.Losses, losses...)
	}
	lost := 0
	for _, l := range rep.Losses {
		if l.lost() {
			lost++
		}
	}
	if lost > 0 && !force {
		return rep, fmt.Errorf("repairing %s: %w (%d parts of backups); nothing was changed", dir, ErrWouldLose, lost)
	}
	id, err := s.writePackIndex(readable)
	if err != nil {
		return rep, fmt.Errorf("writing the new index: %w", err)
	}
	crashPoint("new-index-published")
	return rep, s.removeIndexes(oldIndexes, id)
}

// loadHeaders makes s's index the entries of the packs' headers, each
// checked, and returns the packs whose header reads; the others go to
// rep.Unreadable.
func (s *Store) loadHeaders(packs []ID, rep *RepairReport) ([]ID, error) {
	s.idx = index{}
	if err := s.idx.loadBad(s.dir); err != nil {
		return nil, err
	}
	var readable []ID
	for _, p := range packs {
		n := uint32(len(s.idx.packs))
		start := len(s.idx.entries)
		if _, err := s.eachPackEntry(p, func(e packEntry) error {
			s.idx.entries = append(s.idx.entries, entry{e.id, loc{n, e.off, e.slen, e.rlen, e.zstd}})
			return nil
		}); err != nil {
			s.idx.entries = s.idx.entries[:start]
			rep.Unreadable = append(rep.Unreadable, err.Error())
			continue
		}
		s.idx.packs = append(s.idx.packs, p)
		readable = append(readable, p)
		rep.Packs++
		rep.Chunks += len(s.idx.entries) - start
	}
	slices.SortFunc(s.idx.entries, cmpEntry)
	s.idx.entries = s.idx.dropBad(s.idx.entries)
	s.idx.entries = slices.CompactFunc(s.idx.entries, func(a, b entry) bool { return a.id == b.id })
	return readable, nil
}

// losses is what backup k lacks in s, part by part.
func (s *Store) losses(ctx context.Context, k Kept) ([]Loss, error) {
	var out []Loss
	for _, part := range Parts {
		l := Loss{Backup: filepath.Base(k.Dir), Part: part, Files: []string{}}
		tree, err := k.Rec.Parts[part].treeIDs()
		if err != nil {
			return nil, err
		}
		ids := make([]snaptree.ID, len(tree))
		for i, id := range tree {
			if ids[i] = id; !s.Has(id) {
				l.Tree = true
				l.Chunks++
				l.SetAside += s.countAside(id)
			}
		}
		if !l.Tree {
			err := snaptree.Entries(s.treeReader(ctx, ids), func(e snaptree.Entry) error {
				lacking := 0
				_ = e.Chunks(func(id snaptree.ID) (int64, error) {
					n, ok := s.RawSize(ID(id))
					if !ok {
						lacking++
						l.SetAside += s.countAside(ID(id))
						n, _ = s.SetAside(ID(id))
					}
					return n, nil
				}, nil)
				if lacking > 0 {
					l.Chunks += lacking
					if len(l.Files) < maxLossFiles {
						l.Files = append(l.Files, e.Header.Name)
					} else {
						l.MoreFiles++
					}
				}
				return ctx.Err()
			})
			if err != nil && ctx.Err() != nil {
				return nil, err
			}
			// A tree that does not decode is no loss of this repair's:
			// verification names it.
		}
		if l.Chunks > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// countAside is 1 when chunk id was set aside as corrupt, else 0.
func (s *Store) countAside(id ID) int {
	if _, ok := s.SetAside(id); ok {
		return 1
	}
	return 0
}

// removeIndexes removes the index files old but keep.
func (s *Store) removeIndexes(old []ID, keep ID) error {
	for _, o := range old {
		if o == keep {
			continue
		}
		if err := removeFile(s.indexPath(o)); err != nil {
			return fmt.Errorf("removing an old index: %w", err)
		}
	}
	return nil
}

// packHeader reads the header of one pack, an entry at a time, checking
// the entry count against maxPackEntries, each entry, and that the blobs
// exactly fill the space before the header. It holds one buffer, not the
// entries: an index is written from headers of any size in constant
// memory.
type packHeader struct {
	f          *os.File
	r          *bufio.Reader
	path       string
	n, read    uint32
	off, start int64 // the next blob's offset; where the header starts
	rec        [packEntrySize]byte
}

// openPackHeader opens the header of pack id; the caller closes it.
func (s *Store) openPackHeader(id ID) (*packHeader, error) {
	path := s.packPath(id)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", path, err)
	}
	h := &packHeader{f: f, path: path}
	fi, err := f.Stat()
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("pack %s: %w", path, err)
	}
	size := fi.Size()
	trailer := make([]byte, 4+len(packMagic))
	if size < int64(len(trailer)) || readFull(f, trailer, size-int64(len(trailer))) != nil || !bytes.Equal(trailer[4:], packMagic) {
		h.Close()
		return nil, h.bad("no pack trailer")
	}
	h.n = binary.LittleEndian.Uint32(trailer)
	h.start = size - int64(len(trailer)) - int64(h.n)*packEntrySize
	if h.n > maxPackEntries || h.start < 0 || h.start > math.MaxUint32 {
		h.Close()
		return nil, h.bad(fmt.Sprintf("header of %d entries does not fit (at most %d)", h.n, maxPackEntries))
	}
	h.r = bufio.NewReaderSize(io.NewSectionReader(f, h.start, int64(h.n)*packEntrySize), 64<<10)
	return h, nil
}

func (h *packHeader) bad(what string) error {
	return fmt.Errorf("%w: pack %s: %s", ErrCorrupt, h.path, what)
}

// next is the header's next entry, with its offset; io.EOF after the
// last, once the blobs are found to fill the pack before the header.
func (h *packHeader) next() (packEntry, error) {
	if h.read == h.n {
		if h.off != h.start {
			return packEntry{}, h.bad(fmt.Sprintf("blobs of %d bytes in %d bytes of data", h.off, h.start))
		}
		return packEntry{}, io.EOF
	}
	if _, err := io.ReadFull(h.r, h.rec[:]); err != nil {
		return packEntry{}, h.bad(err.Error())
	}
	e, err := parsePackEntry(h.rec[:], false)
	if err != nil {
		return e, h.bad(err.Error())
	}
	e.off = uint32(h.off)
	h.off += int64(e.slen)
	h.read++
	if h.off > h.start {
		return e, h.bad(fmt.Sprintf("blobs of more than the %d bytes of data", h.start))
	}
	return e, nil
}

func (h *packHeader) Close() { _ = h.f.Close() }

// eachPackEntry calls fn with each entry of pack id's header, checked.
func (s *Store) eachPackEntry(id ID, fn func(packEntry) error) (n uint32, err error) {
	h, err := s.openPackHeader(id)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	for {
		e, err := h.next()
		if errors.Is(err, io.EOF) {
			return h.n, nil
		}
		if err != nil {
			return h.n, err
		}
		if err := fn(e); err != nil {
			return h.n, err
		}
	}
}
