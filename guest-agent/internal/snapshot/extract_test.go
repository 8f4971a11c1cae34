package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type tentry struct {
	name, link string
	typ        byte
	body       string
}

func archive(t *testing.T, entries ...tentry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestExtractRejectsUnsafeEntries(t *testing.T) {
	file := func(name string) tentry { return tentry{name: name, typ: tar.TypeReg, body: "evil"} }
	tests := []struct {
		name    string
		entries []tentry
	}{
		{"dot-dot", []tentry{file("../evil")}},
		{"absolute", []tentry{file("/evil")}},
		{"inner dot-dot", []tentry{file("./a/../../evil")}},
		{"through symlink", []tentry{{name: "./lnk", typ: tar.TypeSymlink, link: "../outside"}, file("./lnk/evil")}},
		{"through absolute symlink", []tentry{{name: "./lnk", typ: tar.TypeSymlink, link: "/"}, file("./lnk/evil")}},
		{"hard link outside", []tentry{{name: "./hl", typ: tar.TypeLink, link: "../outside/target"}}},
		{"hard link to an existing file", []tentry{{name: "./hl", typ: tar.TypeLink, link: "./preexisting"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dest, outside := filepath.Join(base, "dest"), filepath.Join(base, "outside")
			for _, d := range []string{dest, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "target"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dest, "preexisting"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := extract(t.Context(), archive(t, tt.entries...), dest, extractOptions{})
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Fatalf("extract: %v, want ErrUnsafeEntry", err)
			}
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(outside, "evil"), "/evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

func TestPartSpec(t *testing.T) {
	if _, err := PartSpec("/", "etc"); err == nil {
		t.Fatal("unknown part accepted")
	}
	s, err := PartSpec("/r", PartWorkspace)
	if err != nil || s.Dir != "/r/workspace" {
		t.Fatalf("%+v %v", s, err)
	}
}
