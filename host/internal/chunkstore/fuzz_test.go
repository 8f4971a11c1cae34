package chunkstore

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// seedStore is a store with a few chunks, for the fuzz seeds.
func seedStore(f *testing.F) (pack, index []byte) {
	dir := f.TempDir()
	s := openStore(f, dir)
	put(f, s, set("fuzz", 3, 2000))
	pack, err := os.ReadFile(only(f, dir, packsDir))
	must(f, err)
	index, err = os.ReadFile(only(f, dir, indexDir))
	must(f, err)
	return pack, index
}

// FuzzPackHeader: Repair reads any pack file without panicking, and what
// it accepts has blobs that exactly fill the pack before its header.
func FuzzPackHeader(f *testing.F) {
	pack, _ := seedStore(f)
	f.Add(pack)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		s, err := open(dir, false)
		must(t, err)
		defer s.Close()
		id := ID(sha256.Sum256(data))
		must(t, os.WriteFile(s.packPath(id), data, 0o600))
		var entries []packEntry
		_, err = s.eachPackEntry(id, func(e packEntry) error {
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			return
		}
		var end int64
		for _, e := range entries {
			if int64(e.off) != end || e.check() != nil {
				t.Fatalf("accepted entry %+v at %d", e, end)
			}
			end += int64(e.slen)
		}
		if end+int64(len(entries))*packEntrySize+12 != int64(len(data)) {
			t.Fatalf("accepted a pack of %d bytes whose blobs end at %d", len(data), end)
		}
	})
}

// FuzzIndex: Open reads any index file (named by its hash, as a damaged
// or planted one would be) without panicking.
func FuzzIndex(f *testing.F) {
	_, index := seedStore(f)
	f.Add(index)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, indexDir), 0o700))
		must(t, os.WriteFile(filepath.Join(dir, indexDir, ID(sha256.Sum256(data)).String()+indexExt), data, 0o600))
		s, err := Open(dir)
		if err == nil {
			s.Close()
		}
	})
}
