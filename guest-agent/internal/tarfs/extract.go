package tarfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"
)

// Options tune Extract.
type Options struct {
	// Strip drops this many leading path components (tar
	// --strip-components); entries that vanish with them are skipped.
	Strip int
	// Skip leaves out entries (cleaned slash paths, after Strip) with
	// everything below them.
	Skip func(rel string) bool
	// HeaderOwners applies each entry's uid and gid (only root may);
	// otherwise UID and GID (-1: the process's own) own every entry.
	HeaderOwners bool
	UID, GID     int
	// Mode gives an entry's mode bits; nil keeps its permissions, set-id
	// and sticky bits.
	Mode func(*tar.Header) uint32
	// MaxBytes bounds the regular file bytes written; 0 means no bound.
	MaxBytes int64
	// Specials allows device nodes and fifos (a restore as root).
	Specials bool
	// LinksInside refuses a symlink whose target, resolved inside dest
	// through the symlinks extracted there, leads outside it (checked when
	// the archive is done, so a later entry cannot change the answer).
	LinksInside bool
}

// Result describes what Extract wrote.
type Result struct {
	// Entries is the number of entries extracted.
	Entries int
	// Listed holds each extracted entry's cleaned slash path ("" for the
	// top).
	Listed map[string]bool
}

// Extract unpacks the tar stream r below dest, an existing directory that
// may already hold files: an entry replaces what is at its name (a whole
// tree for a directory replaced by something else). Names that are
// absolute or hold ".." are refused, so is anything written through a
// symlink or a non-directory on disk, and a hard link to anything but a
// regular file of the same archive. Directory metadata is applied last.
func Extract(ctx context.Context, r io.Reader, dest string, opt Options) (Result, error) {
	t, err := openTree(dest, treeOpts{headerOwners: opt.HeaderOwners, uid: opt.UID, gid: opt.GID,
		specials: opt.Specials, modeOf: opt.Mode})
	if err != nil {
		return Result{}, err
	}
	defer t.close()
	x := &extraction{t: t, opt: opt, res: Result{Listed: map[string]bool{}}, regular: map[string]bool{}}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return x.res, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.res, fmt.Errorf("reading archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.res, fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	if err := x.checkLinks(); err != nil {
		return x.res, err
	}
	return x.res, t.finish()
}

type extraction struct {
	t   *tree
	opt Options
	res Result
	// regular holds the regular files extracted, the only hard link
	// targets.
	regular  map[string]bool
	symlinks [][]string
	written  int64
}

// clean applies CleanParts and Strip; ok is false for entries that vanish.
func (x *extraction) clean(name string) ([]string, bool, error) {
	parts, rule := CleanParts(name)
	if rule != "" {
		return nil, false, fmt.Errorf("%w: %s", ErrUnsafe, rule)
	}
	if x.opt.Strip > 0 {
		if len(parts) <= x.opt.Strip {
			return nil, false, nil
		}
		parts = parts[x.opt.Strip:]
	}
	return parts, true, nil
}

func (x *extraction) entry(hdr *tar.Header, r io.Reader) error {
	parts, ok, err := x.clean(hdr.Name)
	if err != nil || !ok {
		return err
	}
	rel := strings.Join(parts, "/")
	if x.opt.Skip != nil && rel != "" && x.opt.Skip(rel) {
		return nil
	}
	var link []string
	switch hdr.Typeflag {
	case tar.TypeLink:
		link, ok, err = x.clean(hdr.Linkname)
		if err != nil || !ok || !x.regular[strings.Join(link, "/")] {
			return fmt.Errorf("%w: hard link to %q, which is not a file of this archive", ErrUnsafe, hdr.Linkname)
		}
	case tar.TypeReg:
		if x.opt.MaxBytes > 0 && x.written+hdr.Size > x.opt.MaxBytes {
			return fmt.Errorf("archive expands beyond %d bytes", x.opt.MaxBytes)
		}
		x.written += hdr.Size
	}
	if err := x.t.entry(parts, hdr, r, link); err != nil {
		return err
	}
	x.res.Entries++
	x.res.Listed[rel] = true
	x.regular[rel] = hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeLink
	if hdr.Typeflag == tar.TypeSymlink && x.opt.LinksInside {
		if strings.HasPrefix(hdr.Linkname, "/") {
			return fmt.Errorf("%w: link to %q points outside the destination", ErrUnsafe, hdr.Linkname)
		}
		x.symlinks = append(x.symlinks, parts)
	}
	return nil
}

// checkLinks resolves every extracted symlink inside the destination, as
// the kernel would from there, and refuses one that leads out.
func (x *extraction) checkLinks() error {
	for _, parts := range x.symlinks {
		if err := x.resolveInside(parts); err != nil {
			return fmt.Errorf("%w: link %q points outside the destination (%v)", ErrUnsafe, strings.Join(parts, "/"), err)
		}
	}
	return nil
}

// resolveInside follows the symlink at parts through the tree (at most 40
// links, as the kernel) and fails if a ".." would leave the top or a link
// is absolute.
func (x *extraction) resolveInside(parts []string) error {
	dir := append([]string{}, parts[:len(parts)-1]...)
	todo := []string{parts[len(parts)-1]}
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(dir) == 0 {
				return errors.New("\"..\" above the top")
			}
			dir = dir[:len(dir)-1]
			continue
		}
		target, err := x.readlink(dir, c)
		if err != nil {
			dir = append(dir, c) // not a symlink, or missing: a plain name
			continue
		}
		if hops++; hops > 40 {
			return errors.New("too many levels of symbolic links")
		}
		if strings.HasPrefix(target, "/") {
			return fmt.Errorf("absolute link %q", target)
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return nil
}

func (x *extraction) readlink(dir []string, name string) (string, error) {
	fd, err := x.t.aux.open(dir, false)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
