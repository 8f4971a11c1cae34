//go:build !hbxrelease

package tarfstest

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// TarReference extracts the gzip layers into dest with GNU tar, applying
// each layer's whiteouts first (OCI: a whiteout removes what lower layers
// wrote, an opaque marker empties its directory), then removing the
// markers tar wrote. Owners are not restored (--no-same-owner), as the
// agent's unpack gives every file to one user. A directory ends with the
// time of the last layer that lists it, as in the image's merged view (tar
// leaves the time of the extraction on a directory a later layer wrote
// into without listing it).
func TarReference(ctx context.Context, tarBin string, layers []string, dest string) error {
	dirTimes := map[string]time.Time{}
	for _, l := range layers {
		if err := applyWhiteouts(l, dest, dirTimes); err != nil {
			return fmt.Errorf("whiteouts of %s: %w", l, err)
		}
		out, err := exec.CommandContext(ctx, tarBin, "--no-same-owner", "-xzf", l, "-C", dest).CombinedOutput()
		if err != nil {
			return fmt.Errorf("tar -xzf %s: %w: %s", l, err, out)
		}
	}
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".wh.") {
			return os.RemoveAll(p)
		}
		return err
	})
	if err != nil {
		return err
	}
	for name, mt := range dirTimes {
		p := filepath.Join(dest, name)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			if err := os.Chtimes(p, mt, mt); err != nil {
				return err
			}
		}
	}
	return nil
}

func applyWhiteouts(layer, dest string, dirTimes map[string]time.Time) error {
	f, err := os.Open(layer)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeDir {
			dirTimes[filepath.Clean(hdr.Name)] = hdr.ModTime
		}
		dir, name := filepath.Split(filepath.Clean(hdr.Name))
		target, ok := strings.CutPrefix(name, ".wh.")
		switch {
		case !ok:
		case target == ".wh..opq":
			ents, _ := os.ReadDir(filepath.Join(dest, dir))
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(dest, dir, e.Name())); err != nil {
					return err
				}
			}
		default:
			if err := os.RemoveAll(filepath.Join(dest, dir, target)); err != nil {
				return err
			}
		}
	}
}

// CompareTrees reports the first difference between two trees: the set of
// paths, each one's type, permission bits, modification time (not for the
// tops), content or symlink target, and which paths share an inode.
func CompareTrees(a, b string) error {
	la, err := listTree(a)
	if err != nil {
		return err
	}
	lb, err := listTree(b)
	if err != nil {
		return err
	}
	if len(la) != len(lb) {
		return fmt.Errorf("%s has %d entries, %s has %d (first difference: %s)", a, len(la), b, len(lb), firstMissing(la, lb))
	}
	for i := range la {
		if la[i] != lb[i] {
			return fmt.Errorf("entries differ:\n  %s: %s\n  %s: %s", a, la[i], b, lb[i])
		}
	}
	return nil
}

func firstMissing(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q against %q", a[i], b[i])
		}
	}
	return "at the end"
}

// listTree describes every entry below root in one sorted line each.
func listTree(root string) ([]string, error) {
	var out []string
	inodes := map[uint64][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %s mtime=%d", rel, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
			if st.Nlink > 1 {
				inodes[st.Ino] = append(inodes[st.Ino], rel)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + t
		}
		out = append(out, line)
		return nil
	})
	for _, names := range inodes {
		slices.Sort(names)
		out = append(out, "hardlinks "+strings.Join(names, " "))
	}
	slices.Sort(out)
	return out, err
}

// Layers returns the paths of generated layers.
func Layers(ls []Layer) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Path)
	}
	return out
}

// Blobs reads generated layers into memory.
func Blobs(ls []Layer) ([][]byte, error) {
	var out [][]byte
	for _, l := range ls {
		b, err := os.ReadFile(l.Path)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
