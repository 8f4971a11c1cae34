package snaptree

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type file struct {
	hdr  tar.Header
	body []byte
}

func random(seed string, n int) []byte {
	var out []byte
	for i := 0; len(out) < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s %d", seed, i))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

// box is a small tree with every kind of entry the guest writes.
func box(big []byte) []file {
	mt := time.Unix(1700000000, 0)
	return []file{
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: mt}},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755, ModTime: mt}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/hostname", Mode: 0o644, ModTime: mt, Uname: "root"}, body: []byte("box\n")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/empty", Mode: 0o600, Uid: 1000, Gid: 1000, ModTime: mt}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "work/big.bin", Mode: 0o644, ModTime: mt,
			PAXRecords: map[string]string{"SCHILY.xattr.user.note": "kept"}}, body: big},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "work/" + strings.Repeat("long-name/", 20) + "f", Mode: 0o644, ModTime: mt}, body: []byte("deep")},
		{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "etc/link", Linkname: "hostname", Mode: 0o777, ModTime: mt}},
		{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "etc/hard", Linkname: "etc/hostname", ModTime: mt}},
	}
}

func tarOf(t testing.TB, files []file) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := f.hdr
		h.Size = int64(len(f.body))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// store is an in-memory chunk store counting the bytes it added.
type store struct {
	chunks map[ID][]byte
	added  int64
}

func (s *store) sink(id ID, data []byte) error {
	if _, ok := s.chunks[id]; !ok {
		s.chunks[id] = bytes.Clone(data)
		s.added += int64(len(data))
	}
	return nil
}

func (s *store) fetch(id ID) ([]byte, error) {
	if c, ok := s.chunks[id]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("chunk %x missing", id)
}

func entries(t testing.TB, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%c %s %o %d/%d %s %d %q %v %x", h.Typeflag, h.Name, h.Mode, h.Uid, h.Gid,
			h.ModTime.UTC(), h.Size, h.Linkname, h.PAXRecords["SCHILY.xattr.user.note"], sha256.Sum256(body)))
	}
}

func TestRoundTripAndDedup(t *testing.T) {
	big := random("big", 3<<20)
	src := tarOf(t, box(big))
	s := &store{chunks: map[ID][]byte{}}
	tree, st, err := Encode(bytes.NewReader(src), s.sink)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 8 || st.Bytes != int64(len(big)+8) {
		t.Fatalf("stats %+v", st)
	}
	var out bytes.Buffer
	if err := Decode(Reader(tree, s.fetch), s.fetch, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(entries(t, out.Bytes()), "\n"), strings.Join(entries(t, src), "\n"); got != want {
		t.Fatalf("decoded:\n%s\nwant:\n%s", got, want)
	}

	// 1000 bytes inserted in the large file: only the chunks around them
	// and the tree's changed chunk are new.
	edited := append(append(bytes.Clone(big[:1<<20]), random("ins", 1000)...), big[1<<20:]...)
	first := s.added
	if _, _, err := Encode(bytes.NewReader(tarOf(t, box(edited))), s.sink); err != nil {
		t.Fatal(err)
	}
	if added := s.added - first; added > 2<<20 || added == 0 {
		t.Fatalf("the edit added %d bytes (the first encoding %d)", added, first)
	}
}

// tree builds a tree by hand, for the hostile cases.
func tree(t *testing.T, hdr tar.Header, body []byte) []byte {
	return tarOf(t, []file{{hdr: hdr, body: body}})
}

func TestDecodeRefuses(t *testing.T) {
	s := &store{chunks: map[ID][]byte{}}
	c := []byte("0123456789")
	id := sha256.Sum256(c)
	_ = s.sink(id, c)
	size := func(n string) map[string]string { return map[string]string{SizeRecord: n} }
	reg := func(pax map[string]string) tar.Header {
		return tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, PAXRecords: pax}
	}
	missing := sha256.Sum256([]byte("missing"))
	big := bytes.Repeat([]byte("b"), MinChunk)
	bid, empty := sha256.Sum256(big), sha256.Sum256(nil)
	_, _ = s.sink(bid, big), s.sink(empty, nil)
	tests := []struct {
		name string
		tree []byte
		want string
	}{
		{"chunks longer than the size", tree(t, reg(size("9")), id[:]), "exceed its size"},
		{"chunks shorter than the size", tree(t, reg(size(fmt.Sprint(MinChunk+11))), bid[:]), "short of its size"},
		{"a short chunk before the last", tree(t, reg(size(fmt.Sprint(MinChunk+10))), append(id[:], bid[:]...)), "short of the 65536"},
		{"an empty chunk", tree(t, reg(size("10")), append(empty[:], id[:]...)), "chunk 0 is empty"},
		{"size not a number", tree(t, reg(size("x")), id[:]), "is not a size"},
		{"negative size", tree(t, reg(size("-1")), nil), "is not a size"},
		{"ids not whole", tree(t, reg(size("10")), id[:31]), "bytes of chunk ids"},
		{"file without a size", tree(t, reg(nil), id[:]), "without a " + SizeRecord},
		{"symlink with a size", tree(t, tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "f", PAXRecords: size("0")}, nil), "with a " + SizeRecord},
		{"missing chunk", tree(t, reg(size("10")), missing[:]), "missing"},
		{"not a tar", []byte("garbage that is not a tar stream at all, long enough to read a header from" + strings.Repeat("x", 512)), "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Decode(bytes.NewReader(tt.tree), s.fetch, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	s := &store{chunks: map[ID][]byte{}}
	tree, _, err := Encode(bytes.NewReader(tarOf(f, box(random("fuzz", 200<<10)))), s.sink)
	if err != nil {
		f.Fatal(err)
	}
	data, err := io.ReadAll(Reader(tree, s.fetch))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	old, err := os.ReadFile(filepath.Join("testdata", "tree-tar.golden")) // the tar format
	if err != nil {
		f.Fatal(err)
	}
	f.Add(old)
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		if err := Decode(bytes.NewReader(data), s.fetch, &out); err != nil {
			return
		}
		entries(t, out.Bytes()) // whatever decodes is a valid tar stream
	})
}
