package snaptree

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDecodeTarTree: a tree in the tar format (testdata/tree-tar.golden,
// written by the encoder before the compact format, of the golden box)
// decodes to the box, its content chunks being the same in both formats.
func TestDecodeTarTree(t *testing.T) {
	src := tarOf(t, box(random("golden", 3<<20)))
	s := &store{chunks: map[ID][]byte{}}
	if _, _, err := Encode(bytes.NewReader(src), s.sink); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join("testdata", "tree-tar.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(old, []byte(treeMagic)) {
		t.Fatal("the tar tree starts with treeMagic")
	}
	var out bytes.Buffer
	if err := Decode(bytes.NewReader(old), s.fetch, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(entries(t, out.Bytes()), "\n"), strings.Join(entries(t, src), "\n"); got != want {
		t.Fatalf("decoded:\n%s\nwant:\n%s", got, want)
	}
}

// record is one record of the compact format, its length first.
func record(hdr tar.Header, ids ...ID) []byte {
	f, _ := appendFields(nil, &hdr, len(ids), nil)
	b := append(binary.AppendUvarint(nil, uint64(len(f))), f...)
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

// compact is a tree of records, treeMagic first and the end record last.
func compact(records ...[]byte) []byte {
	return append(append([]byte(treeMagic), bytes.Join(records, nil)...), 0)
}

func TestDecodeRefusesCompact(t *testing.T) {
	s := &store{chunks: map[ID][]byte{}}
	c := []byte("0123456789")
	id := sha256.Sum256(c)
	_ = s.sink(id, c)
	big := bytes.Repeat([]byte("b"), MinChunk) // the smallest chunk but a file's last
	bid, empty := sha256.Sum256(big), sha256.Sum256(nil)
	_, _ = s.sink(bid, big), s.sink(empty, nil)
	reg := func(size int64) tar.Header {
		return tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, Size: size, ModTime: time.Unix(1700000000, 0)}
	}
	good := record(reg(10), id)
	fields := good[1:] // good's length fits one byte
	withLen := func(n uint64, body []byte) []byte { return append(binary.AppendUvarint(nil, n), body...) }
	// A record saying two ids, then one that makes the size, then the
	// tree's end.
	h := reg(MinChunk)
	twoIDs, _ := appendFields(nil, &h, 2, nil)
	oneOfTwo := append(withLen(uint64(len(twoIDs)), twoIDs), bid[:]...)
	pax := func(n, size int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%04d", i)] = strings.Repeat("v", size)
		}
		return m
	}
	tests := []struct {
		name string
		tree []byte
		want string
	}{
		{"chunks longer than the size", compact(record(reg(9), id)), "exceed its size"},
		{"chunks shorter than the size", compact(record(reg(MinChunk+11), bid)), "short of its size"},
		{"an empty chunk", compact(record(reg(2*MinChunk), bid, empty, bid)), "chunk 1 is empty"},
		{"a short chunk before the last", compact(record(reg(MinChunk+10), id, bid)), "chunk 0 has 10 bytes, short of the 65536"},
		{"more chunks than the size allows", compact(record(reg(10), id, id)), "2 chunks for 10 bytes, over the limit of 1"},
		{"PAX records over the count", compact(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", PAXRecords: pax(MaxPAXRecords+1, 1)})), "257 PAX records"},
		{"PAX records over the bytes", compact(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", PAXRecords: pax(2, MaxPAXBytes/2)})), "over the limit of 262144"},
		{"missing chunk", compact(record(reg(10), sha256.Sum256([]byte("missing")))), "missing"},
		{"no end record", compact(good)[:len(treeMagic)+len(good)], "length"},
		{"bytes after the end", append(compact(good), 'x'), "after the tree's end"},
		{"a record cut short", []byte(treeMagic + string(good[:8])), "record"},
		{"ids cut short", []byte(treeMagic + string(good[:len(good)-5])), "unexpected EOF"},
		{"fewer ids than the record says", []byte(treeMagic + string(oneOfTwo)), "f: unexpected EOF"},
		{"a record over the limit", compact(withLen(MaxRecord+1, nil)), "over the limit"},
		{"bytes after a record's fields", compact(append(withLen(uint64(len(fields)+1), fields), 0)), "after its record's fields"},
		{"an unknown entry type", compact(record(tar.Header{Typeflag: 'V', Name: "v"})), "entry type"},
		{"a directory with a body", compact(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", Size: 10}, id)), "has a body"},
		{"a uid out of range", compact(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", Uid: 1 << 40})), "out of range"},
		{"nanoseconds out of range", compact(bytes.Replace(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", ModTime: time.Unix(5, 999)}),
			binary.AppendUvarint(nil, 999), binary.AppendUvarint(nil, 1e9), 1)), "nanoseconds"},
		{"PAX records out of order", compact(bytes.Replace(record(tar.Header{Typeflag: tar.TypeDir, Name: "d/", PAXRecords: map[string]string{"a": "1", "b": "2"}}),
			[]byte("\x01b\x012"), []byte("\x01a\x012"), 1)), "out of order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Decode(bytes.NewReader(tt.tree), s.fetch, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
	if err := Decode(bytes.NewReader(compact(good)), s.fetch, io.Discard); err != nil {
		t.Fatalf("the good tree: %v", err)
	}
}

// TestEntriesSkipsUnreadIDs: an entry whose chunks fn does not read is
// skipped whole, the next entry read right.
func TestEntriesSkipsUnreadIDs(t *testing.T) {
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	tree := compact(record(tar.Header{Typeflag: tar.TypeReg, Name: "f", Size: MinChunk + 1}, a, b), record(tar.Header{Typeflag: tar.TypeDir, Name: "d/"}))
	var names []string
	if err := Entries(bytes.NewReader(tree), func(e Entry) error { names = append(names, e.Header.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "f d/" {
		t.Fatalf("entries %q", names)
	}
}

func TestEncoderRefusesWhatItCannotWrite(t *testing.T) {
	tests := []struct {
		name string
		hdr  tar.Header
		want string
	}{
		{"a negative uid", tar.Header{Typeflag: tar.TypeDir, Name: "d/", Uid: -1}, "out of range"},
		{"a negative mode", tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Mode: -1}, "out of range"},
		{"PAX records over the limit", tar.Header{Typeflag: tar.TypeDir, Name: "d/", PAXRecords: map[string]string{"k": strings.Repeat("v", MaxRecord)}}, "over the limit"},
		{"too many PAX records", tar.Header{Typeflag: tar.TypeDir, Name: "d/", PAXRecords: func() map[string]string {
			m := map[string]string{}
			for i := range MaxPAXRecords + 1 {
				m[fmt.Sprint(i)] = ""
			}
			return m
		}()}, "257 PAX records, over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder(func(ID, []byte) error { return nil })
			if err := e.WriteHeader(&tt.hdr); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}
