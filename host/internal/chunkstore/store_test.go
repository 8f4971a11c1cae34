package chunkstore

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestRoundTripAndDedup(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := set("a", 40, 300<<10) // over one pack
	st := put(t, s, append(a, a[:5]...))
	if st.Chunks != 45 || st.NewChunks != 40 {
		t.Fatalf("stats %+v: want 45 given, 40 new", st)
	}
	if st.Stored >= st.NewBytes {
		t.Fatalf("stored %d of %d bytes: text chunks were not compressed", st.Stored, st.NewBytes)
	}
	mustRead(t, s, a)

	s2 := openStore(t, dir)
	mustRead(t, s2, a)
	b := set("b", 4, 100<<10)
	st = put(t, s2, append(b, a...))
	if st.NewChunks != 4 {
		t.Fatalf("second write added %d chunks, want only the 4 new ones", st.NewChunks)
	}
	mustRead(t, openStore(t, dir), append(a, b...))
	if n := len(files(t, dir)); n != 4 {
		t.Fatalf("store files %v: want two packs and two indexes", files(t, dir))
	}
}

// TestAddVerifiedKeepsTheFrame: a chunk that came compressed is stored as
// the frame it came in (not compressed again) when that is smaller, one
// that came plain stays plain, and each reads back.
func TestAddVerifiedKeepsTheFrame(t *testing.T) {
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	must(t, err)
	text := chunk("t", 0, 64<<10, false)
	frame := zw.EncodeAll(text, nil)
	tests := []struct {
		name         string
		data, packed []byte
		stored       int
	}{
		{"a smaller frame", text, frame, len(frame)},
		{"plain", text, nil, len(text)},
		{"a frame no smaller", []byte("x"), zw.EncodeAll([]byte("x"), nil), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			w, err := s.NewWriter()
			must(t, err)
			if added, err := w.addVerified(Sum(tt.data), tt.data, tt.packed); err != nil || !added {
				t.Fatalf("addVerified: added %v, %v", added, err)
			}
			must(t, w.Commit())
			if got := w.Stats().Stored; got != int64(tt.stored) {
				t.Fatalf("stored %d bytes, want %d", got, tt.stored)
			}
			got, err := s.Read(Sum(tt.data), nil)
			must(t, err)
			if !bytes.Equal(got, tt.data) {
				t.Fatal("the chunk reads back changed")
			}
		})
	}
}

func TestPutRefuses(t *testing.T) {
	s := openStore(t, t.TempDir())
	w, err := s.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	c := chunk("x", 0, 1000, true)
	tests := []struct {
		name string
		id   ID
		data []byte
	}{
		{"hash mismatch", Sum(c), append([]byte{1}, c[1:]...)},
		{"too large", Sum(make([]byte, MaxChunk+1)), make([]byte, MaxChunk+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := w.Put(tt.id, tt.data)
			wantErr(t, err, ErrCorrupt)
			if s.Has(tt.id) {
				t.Fatal("a refused chunk is held")
			}
		})
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a := set("a", 2, 1000)
	put(t, s, a)
	before := files(t, dir)
	w, err := s.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range set("big", 70, 300<<10) { // publishes a pack
		if _, err := w.Put(Sum(c), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Fatalf("after abort %v, before %v", got, before)
	}
	if s.Len() != 2 {
		t.Fatalf("store holds %d chunks after abort, want 2", s.Len())
	}
	mustRead(t, s, a)
}

// TestAbortReloadsInPlace: the reload after Abort (a refused snapshot)
// reads the index into the array the store had, holding the same
// chunks: the index is never held twice (TestStoreCapHeap's refusal at
// the cap peaked at 111 MiB of heap reading it anew, 80 MiB in place).
func TestAbortReloadsInPlace(t *testing.T) {
	dir := t.TempDir()
	a := set("a", 100, 1000)
	put(t, openStore(t, dir), a)
	s := openStore(t, dir)
	was := &s.idx.entries[0]
	w, err := s.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range set("b", 10, 1000) {
		if _, err := w.Put(Sum(c), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(a) || &s.idx.entries[0] != was {
		t.Fatalf("after abort the store holds %d chunks (want %d), its index read into a new array: %v", s.Len(), len(a), &s.idx.entries[0] != was)
	}
	mustRead(t, s, a)
}

// TestHostile damages a store in each way and checks the damage is
// refused (never returned as data) and what repair recovers.
func TestHostile(t *testing.T) {
	a := set("a", 6, 50<<10)
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		// open fails; reading fails with err (nil: reads fine).
		openErr, readErr error
		// repaired: every chunk readable after Repair.
		repaired bool
	}{
		{"index deleted", func(t *testing.T, dir string) {
			must(t, os.Remove(only(t, dir, indexDir)))
		}, nil, ErrMissing, true},
		{"index corrupt", func(t *testing.T, dir string) {
			flip(t, only(t, dir, indexDir), 40)
		}, ErrCorrupt, nil, true},
		{"index truncated", func(t *testing.T, dir string) {
			shorten(t, only(t, dir, indexDir), 10)
		}, ErrCorrupt, nil, true},
		{"pack deleted (record names a missing chunk)", func(t *testing.T, dir string) {
			must(t, os.Remove(only(t, dir, packsDir)))
		}, nil, ErrMissing, false},
		{"chunk corrupt in its pack", func(t *testing.T, dir string) {
			flip(t, only(t, dir, packsDir), 100)
		}, nil, ErrCorrupt, false},
		{"pack truncated", func(t *testing.T, dir string) {
			halve(t, only(t, dir, packsDir))
		}, nil, ErrCorrupt, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, openStore(t, dir), a)
			tt.damage(t, dir)
			s, err := Open(dir)
			wantErr(t, err, tt.openErr)
			if err != nil && !strings.Contains(err.Error(), "backups repair") {
				t.Fatalf("error %q does not say how to repair", err)
			}
			if err == nil {
				wantErr(t, readAll(s, a), tt.readErr)
				s.Close()
			}
			if _, err := Repair(context.Background(), dir, nil, false); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir)
			got := readAll(s, a)
			if tt.repaired && got != nil {
				t.Fatalf("after repair: %v", got)
			}
			if !tt.repaired && got == nil {
				t.Fatal("every chunk reads after unrecoverable damage")
			}
		})
	}
}

func readAll(s *Store, chunks [][]byte) error {
	for _, c := range chunks {
		got, err := s.Read(Sum(c), nil)
		if err != nil {
			return err
		}
		if string(got) != string(c) {
			return os.ErrInvalid
		}
	}
	return nil
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	must(t, os.Chmod(path, 0o600))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	must(t, err)
}

// shorten cuts the last n bytes of path.
func shorten(t *testing.T, path string, n int64) {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	must(t, os.Chmod(path, 0o600))
	must(t, os.Truncate(path, fi.Size()-n))
}

func halve(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	shorten(t, path, fi.Size()/2)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
