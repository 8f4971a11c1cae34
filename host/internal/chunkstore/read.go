package chunkstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// maxOpenPacks bounds the pack files Read keeps open.
const maxOpenPacks = 64

// Read returns chunk id, appended to buf[:0]. It reads the blob, bounds
// its decompression to the recorded length, and re-hashes the plaintext:
// a chunk that does not hash to id is an ErrCorrupt error, never data.
// One not held is an ErrMissing error, or ErrDamaged when it was set
// aside as corrupt.
func (s *Store) Read(id ID, buf []byte) ([]byte, error) {
	_, data, _, err := s.read(id, buf)
	return data, err
}

// read is Read that also returns the chunk's stored bytes (a new slice)
// and where the index finds it: GC's repack copies them as they are.
func (s *Store) read(id ID, buf []byte) (blob, data []byte, l loc, err error) {
	l, ok := s.idx.find(id)
	if !ok {
		return nil, nil, l, s.notHeld(id)
	}
	pack := s.idx.packs[l.pack]
	f, err := s.openPack(l.pack)
	if err != nil {
		return nil, nil, l, err
	}
	blob = make([]byte, l.slen)
	if err := readFull(f, blob, int64(l.off)); err != nil {
		return nil, nil, l, fmt.Errorf("%w: chunk %s in pack %s: %w", ErrCorrupt, id, pack, err)
	}
	data, err = unpack(s.dec, id, blob, l.zstd, l.rlen, buf)
	if err != nil {
		return nil, nil, l, fmt.Errorf("pack %s: %w", pack, err)
	}
	return blob, data, l, nil
}

// unpack is the plaintext of chunk id from blob, as a pack stores it or a
// stream sends it: decompressed when compressed, within its stated length
// plain (appended to buf[:0] when buf can hold it), and re-hashed. A chunk
// that does not decompress within plain, is not plain bytes long or does
// not hash to id is an ErrCorrupt error, never data.
func unpack(dec *zstd.Decoder, id ID, blob []byte, compressed bool, plain uint32, buf []byte) ([]byte, error) {
	data := blob
	if compressed {
		if cap(buf) < int(plain) {
			buf = make([]byte, 0, plain)
		}
		var err error
		if data, err = dec.DecodeAll(blob, buf[:0:plain]); err != nil {
			return nil, fmt.Errorf("%w: chunk %s does not decompress within its %d bytes: %w", ErrCorrupt, id, plain, err)
		}
	}
	if len(data) != int(plain) {
		return nil, fmt.Errorf("%w: chunk %s is %d bytes, not its %d", ErrCorrupt, id, len(data), plain)
	}
	if sum := Sum(data); sum != id {
		return nil, fmt.Errorf("%w: chunk %s: its content hashes to %s", ErrCorrupt, id, sum)
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
