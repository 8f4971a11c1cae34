package chunkstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// maxOpenPacks bounds the pack files Read keeps open.
const maxOpenPacks = 64

// Read returns chunk id, appended to buf[:0]. It reads the blob, bounds
// its decompression to the recorded length, and re-hashes the plaintext:
// a chunk that does not hash to id is an ErrCorrupt error, never data.
func (s *Store) Read(id ID, buf []byte) ([]byte, error) {
	l, ok := s.idx.find(id)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrMissing, id)
	}
	pack := s.idx.packs[l.pack]
	f, err := s.openPack(l.pack)
	if err != nil {
		return nil, err
	}
	blob := make([]byte, l.slen)
	if err := readFull(f, blob, int64(l.off)); err != nil {
		return nil, fmt.Errorf("%w: chunk %s in pack %s: %w", ErrCorrupt, id, pack, err)
	}
	data := blob
	if l.zstd {
		if cap(buf) < int(l.rlen) {
			buf = make([]byte, 0, l.rlen)
		}
		if data, err = s.dec.DecodeAll(blob, buf[:0:l.rlen]); err != nil {
			return nil, fmt.Errorf("%w: chunk %s in pack %s: %w", ErrCorrupt, id, pack, err)
		}
	}
	if len(data) != int(l.rlen) || Sum(data) != id {
		return nil, fmt.Errorf("%w: chunk %s in pack %s does not hash to its name", ErrCorrupt, id, pack)
	}
	return data, nil
}

// RawSize is the plaintext length of chunk id, and whether it is held.
func (s *Store) RawSize(id ID) (int64, bool) {
	l, ok := s.idx.find(id)
	return int64(l.rlen), ok
}

func (s *Store) openPack(n uint32) (*os.File, error) {
	if f, ok := s.files[n]; ok {
		return f, nil
	}
	if len(s.files) >= maxOpenPacks {
		s.closeFiles()
	}
	path := s.packPath(s.idx.packs[n])
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: pack %s is gone", ErrMissing, path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening pack: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("%w: pack %s is not a regular file", ErrCorrupt, path)
	}
	s.files[n] = f
	return f, nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
