package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/klauspost/pgzip"
	"golang.org/x/sys/unix"
)

// ErrUnsafeEntry is returned for an archive entry that could write outside
// its destination: an absolute name, "..", a path through a symlink, or a
// hard link to something not extracted from the same archive.
var ErrUnsafeEntry = errors.New("unsafe archive entry")

// CleanName turns an archive entry name into a slash path relative to the
// destination ("" for the top), rejecting names that leave it: the rules of
// tarfs.CleanParts (empty, NUL, absolute, any "..").
func CleanName(name string) (string, error) {
	parts, rule := tarfs.CleanParts(name)
	if rule != "" {
		return "", fmt.Errorf("%w: %q", ErrUnsafeEntry, name)
	}
	return strings.Join(parts, "/"), nil
}

// extractOptions tune one extraction.
type extractOptions struct {
	// skip reports entries (relative slash paths) left out with everything
	// below them.
	skip func(rel string) bool
	// chown says whether owners are applied (only root may).
	chown bool
}

// extractor writes one archive below dest.
type extractor struct {
	ctx  context.Context
	dest string
	opts extractOptions
	// listed holds every extracted entry's relative path.
	listed map[string]bool
	// regular holds extracted regular files, the only hard link targets.
	regular map[string]bool
	// realDirs are directories known not to be symlinks.
	realDirs map[string]bool
	dirs     []dirMeta
	buf      []byte
}

type dirMeta struct {
	full string
	hdr  *tar.Header
}

// extract unpacks the gzip tar r below dest and returns the set of entries
// it contained (relative slash paths, "" for the top).
func extract(ctx context.Context, r io.Reader, dest string, opts extractOptions) (map[string]bool, error) {
	zr, err := pgzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading gzip: %w", err)
	}
	defer zr.Close()
	x := &extractor{ctx: ctx, dest: dest, opts: opts, listed: map[string]bool{}, regular: map[string]bool{},
		realDirs: map[string]bool{"": true}, buf: make([]byte, 256<<10)}
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return nil, err
		}
	}
	// Drain gzip padding so the caller's reader is positioned after it.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, fmt.Errorf("reading archive end: %w", err)
	}
	return x.listed, x.finishDirs()
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := CleanName(hdr.Name)
	if err != nil {
		return err
	}
	if x.opts.skip != nil && rel != "" && x.opts.skip(rel) {
		return nil
	}
	full := filepath.Join(x.dest, filepath.FromSlash(rel))
	if err := x.checkParent(rel); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.dir(rel, full, hdr)
	case tar.TypeReg:
		err = x.file(rel, full, hdr, r)
	case tar.TypeSymlink:
		err = x.replace(full, func() error { return os.Symlink(hdr.Linkname, full) })
	case tar.TypeLink:
		err = x.hardlink(rel, full, hdr)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		err = x.replace(full, func() error { return mknod(full, hdr) })
	default:
		return fmt.Errorf("%w: %q has unsupported type %q", ErrUnsafeEntry, hdr.Name, hdr.Typeflag)
	}
	if err != nil {
		return fmt.Errorf("extracting %s: %w", hdr.Name, err)
	}
	x.listed[rel] = true
	if hdr.Typeflag != tar.TypeDir {
		delete(x.realDirs, rel)
		if hdr.Typeflag != tar.TypeLink {
			if err := x.meta(full, hdr); err != nil {
				return fmt.Errorf("extracting %s: %w", hdr.Name, err)
			}
		}
	}
	return nil
}

// checkParent makes sure every directory above rel is a real directory
// below dest, creating missing ones; a symlink on the way is refused.
func (x *extractor) checkParent(rel string) error {
	parent := path.Dir(rel)
	if rel == "" || parent == "." || x.realDirs[parent] {
		return nil
	}
	if err := x.checkParent(parent); err != nil {
		return err
	}
	full := filepath.Join(x.dest, filepath.FromSlash(parent))
	fi, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(full, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", full, err)
		}
	case err != nil:
		return fmt.Errorf("checking %s: %w", full, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %q is below %q, which is not a directory", ErrUnsafeEntry, rel, parent)
	}
	x.realDirs[parent] = true
	return nil
}

func (x *extractor) dir(rel, full string, hdr *tar.Header) error {
	if rel != "" {
		fi, err := os.Lstat(full)
		if err == nil && !fi.IsDir() {
			if err := os.Remove(full); err != nil {
				return err
			}
		}
		if err != nil || !fi.IsDir() {
			if err := os.Mkdir(full, 0o700); err != nil {
				return err
			}
		}
	}
	x.realDirs[rel] = true
	x.dirs = append(x.dirs, dirMeta{full: full, hdr: hdr})
	return nil
}

// replace removes whatever is at full (a whole tree for a directory) and
// then creates the new entry.
func (x *extractor) replace(full string, create func() error) error {
	fi, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.IsDir():
		if err := os.RemoveAll(full); err != nil {
			return err
		}
	default:
		// Unlink first: a running binary cannot be rewritten, only replaced.
		if err := os.Remove(full); err != nil {
			return err
		}
	}
	return create()
}

func (x *extractor) file(rel, full string, hdr *tar.Header, r io.Reader) error {
	return x.replace(full, func() error {
		f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		n, err := io.CopyBuffer(f, onlyReader{r}, x.buf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("short entry: %d of %d bytes", n, hdr.Size)
		}
		x.regular[rel] = true
		return err
	})
}

func (x *extractor) hardlink(rel, full string, hdr *tar.Header) error {
	target, err := CleanName(hdr.Linkname)
	if err != nil || !x.regular[target] {
		return fmt.Errorf("%w: hard link %q to %q, which is not a file of this archive", ErrUnsafeEntry, hdr.Name, hdr.Linkname)
	}
	if target == rel {
		return nil
	}
	x.regular[rel] = true
	return x.replace(full, func() error { return os.Link(filepath.Join(x.dest, filepath.FromSlash(target)), full) })
}

// onlyReader hides WriteTo so io.CopyBuffer uses our large buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func mknod(full string, hdr *tar.Header) error {
	mode := uint32(hdr.Mode & 0o7777)
	switch hdr.Typeflag {
	case tar.TypeChar:
		mode |= unix.S_IFCHR
	case tar.TypeBlock:
		mode |= unix.S_IFBLK
	default:
		mode |= unix.S_IFIFO
	}
	return unix.Mknod(full, mode, int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))))
}

// meta applies owner, mode, extended attributes and times, in an order that
// keeps set-id bits (chown clears them).
func (x *extractor) meta(full string, hdr *tar.Header) error {
	if x.opts.chown {
		if err := os.Lchown(full, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		if !x.opts.chown && !strings.HasPrefix(name, "user.") {
			continue // other namespaces need root
		}
		if err := unix.Lsetxattr(full, name, []byte(v), 0); err != nil {
			return fmt.Errorf("setting extended attribute %s: %w", name, err)
		}
	}
	if hdr.Typeflag != tar.TypeSymlink {
		if err := os.Chmod(full, fs.FileMode(hdr.Mode&0o777)|modeBits(hdr.Mode)); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if hdr.ModTime.IsZero() {
		now := unix.NsecToTimespec(time.Now().UnixNano())
		ts = []unix.Timespec{now, now}
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, full, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// modeBits maps the set-id and sticky bits of a tar mode to Go's.
func modeBits(m int64) fs.FileMode {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// finishDirs applies directory metadata deepest first, after their
// contents stopped changing their times.
func (x *extractor) finishDirs() error {
	for _, d := range slices.Backward(x.dirs) {
		if err := x.meta(d.full, d.hdr); err != nil {
			return fmt.Errorf("extracting %s: %w", d.hdr.Name, err)
		}
	}
	return nil
}
