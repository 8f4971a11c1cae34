package boot

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

var seedIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// seedStaging prefixes the directory a seed is unpacked into before its
// entries are moved into the workspace.
const seedStaging = ".hermes-box-seed-"

// workspaceSeed applies the seed archive packed into the image
// (workspace-seed.tar, plain or gzip, with its id beside it) by id, as the
// reference's workspace-seed script does: when the id recorded in the
// workspace differs (or none is), every top-level entry of the workspace
// is replaced by the seed's, except the user's work/, which is never
// touched once it exists; the same id is a no-op. The id is recorded last,
// so an interrupted seed is redone on the next boot.
func workspaceSeed(ctx context.Context, o *Options) (string, error) {
	idBytes, err := os.ReadFile(o.path(SeedID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", skipped("no workspace seed in the image")
	}
	if err != nil {
		return "", err
	}
	id, err := parseSeedID(idBytes)
	if err != nil {
		return "", fmt.Errorf("/%s: %w", SeedID, err)
	}
	prev := ""
	if cur, err := os.ReadFile(o.path(RestoredID)); err == nil {
		prev = strings.TrimSpace(string(cur))
		if prev == id {
			return "", skipped("workspace already seeded from " + id)
		}
	}
	ws := o.path(Workspace)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	n, kept, err := extractSeed(ctx, o.path(SeedArchive), ws)
	if err != nil {
		return "", fmt.Errorf("seeding the workspace from /%s: %w", SeedArchive, err)
	}
	if err := atomicfile.Write(o.path(RestoredID), []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("workspace seeded from %s (%d entries)", id, n)
	if prev != "" {
		msg = fmt.Sprintf("workspace reseeded from %s, replacing %s (%d entries)", id, prev, n)
	}
	if kept {
		msg += "; work/ kept as it was"
	}
	return msg, nil
}

// parseSeedID accepts an id followed by exactly one newline.
func parseSeedID(b []byte) (string, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || !seedIDPattern.MatchString(s) {
		return "", fmt.Errorf("bad seed id %q: want 1-128 of [A-Za-z0-9._-], starting alphanumeric, and one newline", truncate(string(b)))
	}
	return s, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// keepOnReseed are the workspace's top-level entries a seed never replaces.
var keepOnReseed = map[string]bool{"lost+found": true, "work": true}

// extractSeed unpacks the archive into a staging directory inside ws, then
// replaces ws's top-level entries with the staged ones, keeping work/ and
// lost+found; stale staging directories of an interrupted seed go first.
// It returns the entry count and whether an existing work/ was kept.
func extractSeed(ctx context.Context, archive, ws string) (int, bool, error) {
	if err := removeStaging(ws); err != nil {
		return 0, false, err
	}
	f, err := os.Open(archive)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	staging, err := os.MkdirTemp(ws, seedStaging)
	if err != nil {
		return 0, false, err
	}
	defer os.RemoveAll(staging)
	r, err := maybeGunzip(f)
	if err != nil {
		return 0, false, err
	}
	n, err := untar(ctx, r, staging)
	if err != nil {
		return n, false, err
	}
	kept, err := replaceTop(ws, staging)
	return n, kept, err
}

func removeStaging(ws string) error {
	ents, err := os.ReadDir(ws)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), seedStaging) {
			if err := os.RemoveAll(filepath.Join(ws, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaceTop removes ws's top-level entries (but the kept ones and the
// staging directory) and moves staging's entries in.
func replaceTop(ws, staging string) (bool, error) {
	ents, err := os.ReadDir(ws)
	if err != nil {
		return false, err
	}
	kept := false
	for _, e := range ents {
		name := e.Name()
		if keepOnReseed[name] || filepath.Join(ws, name) == staging {
			kept = kept || name == "work"
			continue
		}
		if err := os.RemoveAll(filepath.Join(ws, name)); err != nil {
			return kept, err
		}
	}
	staged, err := os.ReadDir(staging)
	if err != nil {
		return kept, err
	}
	for _, e := range staged {
		if keepOnReseed[e.Name()] {
			if _, err := os.Lstat(filepath.Join(ws, e.Name())); err == nil {
				continue
			}
		}
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(ws, e.Name())); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		return gzip.NewReader(br)
	}
	return br, nil
}

// untar extracts a tar stream into dir through an os.Root, so no entry can
// land outside it, and refuses names that try. Owners are kept when running
// as root; directory modes are applied last.
func untar(ctx context.Context, r io.Reader, dir string) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	type dirMode struct {
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	n := 0
	for ; ; n++ {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		name, err := entryName(h.Name)
		if err != nil || name == "." {
			if err != nil {
				return n, err
			}
			continue
		}
		if err := extractEntry(root, tr, h, name); err != nil {
			return n, fmt.Errorf("extracting %q: %w", h.Name, err)
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMode{name, h.FileInfo().Mode().Perm() | h.FileInfo().Mode()&(fs.ModeSetgid|fs.ModeSticky), h.ModTime})
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, d.mode); err != nil {
			return n, err
		}
		_ = root.Chtimes(d.name, d.mtime, d.mtime)
	}
	return n, nil
}

// entryName cleans a tar name and refuses absolute names and "..".
func entryName(s string) (string, error) {
	c := path.Clean(strings.TrimPrefix(s, "./"))
	if path.IsAbs(s) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("unsafe path %q in the seed archive", s)
	}
	return c, nil
}

func extractEntry(root *os.Root, tr io.Reader, h *tar.Header, name string) error {
	mode := h.FileInfo().Mode()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o700); err != nil {
			return err
		}
	case tar.TypeReg:
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		target, err := entryName(h.Linkname)
		if err != nil {
			return err
		}
		if err := root.Link(target, name); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported entry type %q", h.Typeflag)
	}
	if os.Geteuid() == 0 {
		if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
			return err
		}
	}
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	// After the chown, which clears setuid and setgid bits.
	if err := root.Chmod(name, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return root.Chtimes(name, h.ModTime, h.ModTime)
}
