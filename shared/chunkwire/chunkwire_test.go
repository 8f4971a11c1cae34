package chunkwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func stream(t testing.TB, chunks [][]byte, tree []ID) []byte {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, c := range chunks {
		if err := w.Chunk(Chunk{ID: sha256.Sum256(c), Plain: uint32(len(c)), Stored: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Progress(7); err != nil {
		t.Fatal(err)
	}
	if err := w.End(End{Entries: 3, Bytes: 9, Read: 7, Tree: tree}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	chunks := [][]byte{[]byte("one"), []byte("two")}
	tree := []ID{sha256.Sum256([]byte("tree"))}
	r := NewReader(bytes.NewReader(stream(t, chunks, tree)))
	var got [][]byte
	for {
		c, read, end, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			if c.ID != sha256.Sum256(c.Stored) {
				t.Fatalf("chunk %x: id does not match", c.ID)
			}
			got = append(got, bytes.Clone(c.Stored))
		} else if end != nil {
			if end.Entries != 3 || end.Bytes != 9 || end.Read != 7 || len(end.Tree) != 1 || end.Tree[0] != tree[0] {
				t.Fatalf("end %+v", end)
			}
			break
		} else if read != 7 {
			t.Fatalf("progress %d", read)
		}
	}
	if len(got) != 2 || string(got[0]) != "one" || string(got[1]) != "two" {
		t.Fatalf("chunks %q", got)
	}

	held := &Held{Committed: tree[0], Prefixes: []uint64{1, 5, 9}}
	var b bytes.Buffer
	if err := WriteHeld(&b, held); err != nil {
		t.Fatal(err)
	}
	back, err := ReadHeld(&b)
	if err != nil || back.Committed != held.Committed || len(back.Prefixes) != 3 {
		t.Fatalf("held %+v, %v", back, err)
	}
	var id ID
	binary.BigEndian.PutUint64(id[:], 5)
	if !back.Has(id) {
		t.Fatal("prefix 5 not held")
	}
}

func TestRefuses(t *testing.T) {
	good := stream(t, [][]byte{[]byte("one")}, nil)
	over := append([]byte{KindChunk}, make([]byte, 32)...)
	over = binary.BigEndian.AppendUint32(over, MaxChunk+1)
	over = binary.BigEndian.AppendUint32(over, 10)
	over = append(over, Zstd)
	bigTree := append([]byte{KindEnd}, make([]byte, 24)...)
	bigTree = binary.BigEndian.AppendUint32(bigTree, MaxTree+1)
	tests := []struct {
		name, want string
		data       []byte
	}{
		{"no end frame", "without its end frame", good[:len(good)-29]},
		{"bytes after the end", "after the end frame", append(bytes.Clone(good), 'x')},
		{"unknown kind", "unknown frame kind", []byte("Z")},
		{"oversized chunk", "over the limit", over},
		{"oversized tree", "over the limit", bigTree},
		{"truncated chunk", "chunk", good[:50]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.data))
			for {
				_, _, end, err := r.Next()
				if err != nil {
					if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
						t.Fatalf("err = %v, want ErrFormat saying %q", err, tt.want)
					}
					return
				}
				if end != nil {
					t.Fatal("accepted")
				}
			}
		})
	}
	var b bytes.Buffer
	_ = WriteHeld(&b, &Held{Prefixes: []uint64{5, 5}})
	if _, err := ReadHeld(&b); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("repeated prefix: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(stream(f, [][]byte{[]byte("one"), []byte("two")}, []ID{{1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for range 1000 {
			c, _, end, err := r.Next()
			if err != nil || end != nil {
				return
			}
			if c != nil && (len(c.Stored) > MaxChunk || c.Plain > MaxChunk) {
				t.Fatalf("chunk of %d stored, %d plain passed", len(c.Stored), c.Plain)
			}
		}
	})
}

func FuzzReadHeld(f *testing.F) {
	var b bytes.Buffer
	_ = WriteHeld(&b, &Held{Prefixes: []uint64{1, 2, 3}})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHeld(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 1; i < len(h.Prefixes); i++ {
			if h.Prefixes[i] <= h.Prefixes[i-1] {
				t.Fatal("unsorted prefixes accepted")
			}
		}
	})
}
