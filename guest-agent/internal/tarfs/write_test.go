package tarfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWrite archives a small tree as `tar -C DIR -cf - .` names it, in
// name order, with hard links, symlinks and excludes, and takes owners from
// the Owner hook when one is given.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "a/skip", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a/f"), []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a/f"), filepath.Join(dir, "b/hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a/f", filepath.Join(dir, "b/sym")); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (int, int, error) {
		if filepath.Base(p) == "sym" {
			return 4242, 4243, nil
		}
		return 1, 2, nil
	}
	var buf bytes.Buffer
	if err := Write(t.Context(), &buf, dir, WriteOptions{Exclude: []string{"a/skip"}, Owner: owner}); err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		switch h.Name {
		case "./b/hard":
			if h.Typeflag != tar.TypeLink || h.Linkname != "./a/f" {
				t.Errorf("%s: type %c link %q, want a hard link to ./a/f", h.Name, h.Typeflag, h.Linkname)
			}
		case "./b/sym":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "../a/f" || h.Uid != 4242 || h.Gid != 4243 {
				t.Errorf("%s: type %c link %q owner %d:%d", h.Name, h.Typeflag, h.Linkname, h.Uid, h.Gid)
			}
		case "./a/f":
			if b, _ := io.ReadAll(tr); string(b) != "data" || h.Mode != 0o640 || h.Uid != 1 || h.Gid != 2 {
				t.Errorf("%s: %q mode %o owner %d:%d", h.Name, b, h.Mode, h.Uid, h.Gid)
			}
		}
	}
	want := []string{"./", "./a/", "./a/f", "./b/", "./b/hard", "./b/sym"}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	failing := func(string) (int, int, error) { return 0, 0, errors.New("no owner") }
	if err := Write(t.Context(), io.Discard, dir, WriteOptions{Owner: failing}); err == nil {
		t.Error("an owner that fails did not fail the archive")
	}
}
