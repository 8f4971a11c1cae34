package chunkstore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chunk is deterministic test data: random-looking (incompressible) when
// random, else text that zstd compresses.
func chunk(seed string, i, size int, random bool) []byte {
	out := make([]byte, 0, size+32)
	for j := 0; len(out) < size; j++ {
		if !random {
			out = fmt.Appendf(out, "%s line %d of chunk %d\n", seed, j, i)
			continue
		}
		var ctr [16]byte
		binary.BigEndian.PutUint64(ctr[:], uint64(i))
		binary.BigEndian.PutUint64(ctr[8:], uint64(j))
		sum := sha256.Sum256(append([]byte(seed), ctr[:]...))
		out = append(out, sum[:]...)
	}
	return out[:size]
}

// set is n chunks of a seed, alternately random and text.
func set(seed string, n, size int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, chunk(seed, i, size, i%2 == 0))
	}
	return out
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// put writes chunks in one committed write.
func put(t testing.TB, s *Store, chunks [][]byte) Stats {
	t.Helper()
	w, err := s.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if _, err := w.Put(Sum(c), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return w.Stats()
}

// mustRead checks every chunk reads back intact.
func mustRead(t testing.TB, s *Store, chunks [][]byte) {
	t.Helper()
	for i, c := range chunks {
		got, err := s.Read(Sum(c), nil)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if string(got) != string(c) {
			t.Fatalf("chunk %d reads back different", i)
		}
	}
}

// held counts the chunks of a set the store holds.
func held(s *Store, chunks [][]byte) int {
	n := 0
	for _, c := range chunks {
		if s.Has(Sum(c)) {
			n++
		}
	}
	return n
}

// files lists the store's files (relative), temp files included.
func files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{packsDir, indexDir} {
		names, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out = append(out, sub+"/"+n.Name())
		}
	}
	return out
}

func only(t testing.TB, dir, sub string) string {
	t.Helper()
	var found []string
	for _, f := range files(t, dir) {
		if strings.HasPrefix(f, sub+"/") {
			found = append(found, filepath.Join(dir, f))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one file in %s, have %v", sub, found)
	}
	return found[0]
}

// largest is the largest file in sub of dir (a snapshot writes a pack
// per part: the rootfs's is the largest).
func largest(t testing.TB, dir, sub string) string {
	t.Helper()
	var path string
	var size int64 = -1
	for _, f := range files(t, dir) {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && strings.HasPrefix(f, sub+"/") && fi.Size() > size {
			path, size = filepath.Join(dir, f), fi.Size()
		}
	}
	if path == "" {
		t.Fatalf("no file in %s", sub)
	}
	return path
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}
