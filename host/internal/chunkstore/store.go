// Package chunkstore is a machine's deduplicating chunk store: chunks named
// by the SHA-256 of their plaintext, compressed with zstd into pack files
// that are written once and named by their own SHA-256, and index files
// (also named by their hash) that say which pack holds which chunk.
//
// The invariants are those restic and borg keep. A pack is complete before
// an index names it, and an index is complete before a snapshot record that
// needs it is published, so a crash at any point leaves at worst files that
// nothing references (removed by GC) and never a reference to something
// missing. Every index can be rebuilt from the packs' own headers (Repair),
// and is written from them. GC removes nothing before it has read its new
// index and packs back and found every live chunk there, and Repair drops
// no chunk a kept backup needs unless forced. A chunk found corrupt is
// set aside, never used for dedup again, and stored anew by the next
// snapshot that brings it; GC and Repair keep that copy, not the bad one.
//
// Layout of the store directory (0700, files 0400):
//
//	packs/<sha256>.pack   blobs, then a header of 41-byte entries, then the
//	                      entry count (uint32 LE) and "HBXPACK1"; closed
//	                      at 16 MiB or maxPackEntries entries
//	index/<sha256>.idx    "HBXIDX01", then per pack: its id, a count
//	                      (uint32 LE) and 45-byte entries (the header's
//	                      fields plus the blob's offset)
//	quarantine            chunks found corrupt, set aside: "<chunk> <pack>"
//	                      lines; those copies are never found (quarantine.go)
//
// The caller holds the operation lock: one writer at a time.
package chunkstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/shared/cdc"
)

// ID names a chunk, a pack or an index: the SHA-256 of its content.
type ID [32]byte

// Sum is the ID of data.
func Sum(data []byte) ID { return sha256.Sum256(data) }

// String is the ID in lowercase hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID reads a lowercase hex ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) || strings.ToLower(s) != s {
		return id, fmt.Errorf("%q is not a lowercase hex SHA-256", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%q is not a lowercase hex SHA-256", s)
	}
	return id, nil
}

// MaxChunk is the most bytes of one chunk, compressed or not: the
// chunker's largest cut. Nothing larger is stored or decompressed.
const MaxChunk = cdc.MaxSize

// Errors a caller can match.
var (
	// ErrCorrupt is a chunk, pack or index whose content does not match
	// its name or format.
	ErrCorrupt = errors.New("corrupt data in the chunk store")
	// ErrMissing is a chunk the store does not hold.
	ErrMissing = errors.New("chunk missing from the store")
)

const (
	packsDir = "packs"
	indexDir = "index"
	packExt  = ".pack"
	indexExt = ".idx"
	// tmpPrefix starts every file being written; Open removes stale ones.
	tmpPrefix = ".tmp-"
)

// Store is an open chunk store. It is not safe for concurrent use.
type Store struct {
	dir   string
	idx   index
	dec   *zstd.Decoder
	files map[uint32]*os.File
	// missingPacks are packs an index names that are not on disk; their
	// chunks are not held.
	missingPacks []ID
	// sample is Verify's choice of chunks to read (sample.go).
	sample *sampler
}

// Open opens (creating it if needed) the store in dir, loads its index
// and removes temp files an interrupted writer left.
func Open(dir string) (*Store, error) {
	return open(dir, true)
}

// OpenReader opens the existing store in dir to read it, without the
// operation lock: it creates nothing and leaves temp files alone (a
// writer may be at work).
func OpenReader(dir string) (*Store, error) {
	for _, d := range []string{packsDir, indexDir} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("opening chunk store: %s is not a store's directory", dir)
		}
	}
	s, err := newStore(dir)
	if err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func newStore(dir string) (*Store, error) {
	dec, err := newDecoder(1)
	if err != nil {
		return nil, fmt.Errorf("opening chunk store: %w", err)
	}
	return &Store{dir: dir, dec: dec, files: map[uint32]*os.File{}}, nil
}

func open(dir string, load bool) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, packsDir), filepath.Join(dir, indexDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("opening chunk store: %w", err)
		}
	}
	s, err := newStore(dir)
	if err != nil {
		return nil, err
	}
	if err := s.removeTemps(); err != nil {
		s.Close()
		return nil, err
	}
	if load {
		if err := s.load(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the open packs and the decoder.
func (s *Store) Close() {
	s.closeFiles()
	s.dec.Close()
}

func (s *Store) closeFiles() {
	for n, f := range s.files {
		_ = f.Close()
		delete(s.files, n)
	}
}

// Has reports whether the store holds chunk id.
func (s *Store) Has(id ID) bool {
	_, ok := s.idx.find(id)
	return ok
}

// Len is the number of chunks held.
func (s *Store) Len() int { return s.idx.len() }

// MissingPacks are packs named by an index but absent: their chunks are
// not held, and backups that need them fail verification.
func (s *Store) MissingPacks() []ID { return s.missingPacks }

func (s *Store) removeTemps() error {
	for _, d := range []string{packsDir, indexDir} {
		names, err := os.ReadDir(filepath.Join(s.dir, d))
		if err != nil {
			return fmt.Errorf("opening chunk store: %w", err)
		}
		for _, n := range names {
			if strings.HasPrefix(n.Name(), tmpPrefix) {
				if err := os.Remove(filepath.Join(s.dir, d, n.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("removing an interrupted write: %w", err)
				}
			}
		}
	}
	return nil
}

// listIDs returns the IDs of the files named <id><ext> in sub; other
// names are ignored.
func (s *Store) listIDs(sub, ext string) ([]ID, error) {
	names, err := os.ReadDir(filepath.Join(s.dir, sub))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", filepath.Join(s.dir, sub), err)
	}
	var ids []ID
	for _, n := range names {
		base, ok := strings.CutSuffix(n.Name(), ext)
		if !ok {
			continue
		}
		if id, err := ParseID(base); err == nil && n.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (s *Store) packPath(id ID) string  { return filepath.Join(s.dir, packsDir, id.String()+packExt) }
func (s *Store) indexPath(id ID) string { return filepath.Join(s.dir, indexDir, id.String()+indexExt) }
