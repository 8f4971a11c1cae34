package chunkstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
)

// RepairReport says what Repair found.
type RepairReport struct {
	Packs, Chunks int
	// Unreadable are packs whose header is damaged: left out of the index.
	Unreadable []string
}

// Repair rebuilds the index of the store in dir from the packs' headers,
// whether or not the index loads: it publishes one new
// index naming every readable pack, then removes the old index files (a
// crash in between leaves two indexes that agree). Chunks in damaged
// packs are not held afterwards; verification names the backups that
// needed them.
func Repair(dir string) (RepairReport, error) {
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
	var groups []packGroup
	for _, p := range packs {
		entries, err := s.readPackHeader(p)
		if err != nil {
			rep.Unreadable = append(rep.Unreadable, err.Error())
			continue
		}
		groups = append(groups, packGroup{pack: p, entries: entries})
		rep.Packs++
		rep.Chunks += len(entries)
	}
	if err := s.replaceIndex(groups, oldIndexes); err != nil {
		return rep, err
	}
	return rep, nil
}

// replaceIndex publishes one index naming groups, then removes the index
// files old (unless one of them is the new one).
func (s *Store) replaceIndex(groups []packGroup, old []ID) error {
	id, err := s.writeIndex(groups)
	if err != nil {
		return fmt.Errorf("writing the new index: %w", err)
	}
	crashPoint("new-index-published")
	for _, o := range old {
		if o == id {
			continue
		}
		if err := removeFile(s.indexPath(o)); err != nil {
			return fmt.Errorf("removing an old index: %w", err)
		}
	}
	return nil
}

// readPackHeader reads and checks the header of pack id: the entry count,
// each entry, and blobs that exactly fill the space before the header.
func (s *Store) readPackHeader(id ID) ([]packEntry, error) {
	path := s.packPath(id)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", path, err)
	}
	bad := func(what string) error { return fmt.Errorf("%w: pack %s: %s", ErrCorrupt, path, what) }
	size := fi.Size()
	trailer := make([]byte, 4+len(packMagic))
	if size < int64(len(trailer)) || readFull(f, trailer, size-int64(len(trailer))) != nil || !bytes.Equal(trailer[4:], packMagic) {
		return nil, bad("no pack trailer")
	}
	n := int64(binary.LittleEndian.Uint32(trailer))
	hdrStart := size - int64(len(trailer)) - n*packEntrySize
	if n > maxPackEntries || hdrStart < 0 {
		return nil, bad(fmt.Sprintf("header of %d entries does not fit", n))
	}
	hdr := make([]byte, n*packEntrySize)
	if err := readFull(f, hdr, hdrStart); err != nil {
		return nil, bad(err.Error())
	}
	entries := make([]packEntry, 0, n)
	var off int64
	for i := range n {
		e, err := parsePackEntry(hdr[i*packEntrySize:(i+1)*packEntrySize], false)
		if err != nil {
			return nil, bad(err.Error())
		}
		e.off = uint32(off)
		off += int64(e.slen)
		entries = append(entries, e)
	}
	if off != hdrStart {
		return nil, bad(fmt.Sprintf("blobs of %d bytes in %d bytes of data", off, hdrStart))
	}
	return entries, nil
}
