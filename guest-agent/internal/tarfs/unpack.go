package tarfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Selected says whether Unpack writes a path of an image.
type Selected uint8

// The answers of a Select function.
const (
	// NotSelected paths are read, checked and skipped.
	NotSelected Selected = iota
	// SelectedDir paths are written and must be directories: they lead to
	// selected trees, so a symlink there would lead elsewhere.
	SelectedDir
	// SelectedAll paths are written whatever they are.
	SelectedAll
)

// Select chooses the paths of an image that Unpack writes. Every ancestor
// of a selected path must be selected too.
type Select func(parts []string) Selected

// SelectAll writes every path, as tar would.
func SelectAll([]string) Selected { return SelectedAll }

// UnpackOptions tune an Unpacker. Every file belongs to UID and GID (-1:
// the process's own ids), whatever the layer says, and set-id and sticky
// bits are dropped, as umoci's rootless unpack with a one-entry id map does.
type UnpackOptions struct {
	// Select chooses what is written; nil means SelectAll.
	Select   Select
	UID, GID int
}

// Unpacker applies the layers of an image, in order, to an empty
// directory: the pre-check (Checker) accepts each entry first, whiteouts
// and opaque directories remove what lower layers wrote, and directory
// metadata is applied by Close.
type Unpacker struct {
	t   *tree
	c   *Checker
	sel Select
	// layer holds the paths the current layer wrote and their ancestors:
	// whiteouts remove only what lower layers wrote.
	layer map[string]struct{}
	// pending holds selected hard links to unselected regular files, by
	// target path, for Materialize.
	pending map[string][]string
	entries int
}

// NewUnpacker opens dest, which must exist and be empty.
func NewUnpacker(dest string, opt UnpackOptions) (*Unpacker, error) {
	if ents, err := os.ReadDir(dest); err != nil || len(ents) > 0 {
		return nil, fmt.Errorf("unpacking into %s: not an empty directory (%v)", dest, err)
	}
	if opt.Select == nil {
		opt.Select = SelectAll
	}
	t, err := openTree(dest, treeOpts{uid: opt.UID, gid: opt.GID, lenientXattrs: true,
		modeOf: func(h *tar.Header) uint32 { return uint32(h.Mode) & 0o777 }})
	if err != nil {
		return nil, err
	}
	return &Unpacker{t: t, c: NewChecker(), sel: opt.Select}, nil
}

// Entries is the number of layer entries read so far.
func (u *Unpacker) Entries() int { return u.entries }

// Layer applies the next layer (an uncompressed tar stream). It returns
// the first refusal (*RefusedError), read or write error; the caller then
// removes dest.
func (u *Unpacker) Layer(ctx context.Context, r io.Reader) error {
	u.c.NextLayer()
	u.layer = map[string]struct{}{}
	tr := tar.NewReader(r)
	for {
		if u.entries&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading layer: %w", err)
		}
		u.entries++
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

func (u *Unpacker) refuse(hdr *tar.Header, r Rule) error {
	return &RefusedError{Layer: u.c.layer, Entry: hdr.Name, Rule: r}
}

func (u *Unpacker) entry(hdr *tar.Header, r io.Reader) error {
	e, err := u.c.Check(hdr)
	if err != nil {
		return err
	}
	if e.Whiteout {
		if len(e.Target) > 0 && u.sel(e.Target) == NotSelected {
			return nil
		}
		return u.whiteout(e)
	}
	sel := u.sel(e.Parts)
	if sel == NotSelected || len(e.Parts) == 0 {
		return nil // the layer's root directory: dest is ours
	}
	if sel == SelectedDir && (hdr.Typeflag != tar.TypeDir) {
		return u.refuse(hdr, RuleSelectedDir)
	}
	if e.LinkParts != nil && u.sel(e.LinkParts) == NotSelected {
		target := strings.Join(e.LinkParts, "/")
		if u.pending == nil {
			u.pending = map[string][]string{}
		}
		u.pending[target] = append(u.pending[target], e.Path())
		u.written(e.Parts)
		return nil
	}
	if err := u.t.entry(e.Parts, hdr, r, e.LinkParts); err != nil {
		return fmt.Errorf("layer %d: unpacking %q: %w", u.c.layer, e.Path(), err)
	}
	u.written(e.Parts)
	return nil
}

// written notes that the current layer wrote parts (and so its parents).
func (u *Unpacker) written(parts []string) {
	for i := len(parts); i > 0; i-- {
		p := strings.Join(parts[:i], "/")
		if _, ok := u.layer[p]; ok && i < len(parts) {
			return
		}
		u.layer[p] = struct{}{}
	}
}

// whiteout removes what lower layers wrote at the target (an opaque
// whiteout: below its directory); what this layer wrote stays.
func (u *Unpacker) whiteout(e Entry) error {
	target := e.Target
	if _, mine := u.layer[strings.Join(target, "/")]; e.Opaque || mine || len(target) == 0 {
		return u.clearLower(target)
	}
	pfd, err := u.t.w.open(target[:len(target)-1], false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	return u.t.removeAt(pfd, target[len(target)-1], target)
}

// clearLower removes from directory dir everything the current layer did
// not write.
func (u *Unpacker) clearLower(dir []string) error {
	fd, err := u.t.w.open(dir, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, ErrUnsafe) {
		return nil // nothing there, or not a directory: nothing below it
	}
	if err != nil {
		return err
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), strings.Join(dir, "/"))
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("listing %q: %w", strings.Join(dir, "/"), err)
	}
	for _, ent := range ents {
		child := append(append([]string{}, dir...), ent.Name())
		if _, mine := u.layer[strings.Join(child, "/")]; mine {
			if ent.IsDir() {
				if err := u.clearLower(child); err != nil {
					return err
				}
			}
			continue
		}
		pfd, err := u.t.w.open(dir, false)
		if err != nil {
			return err
		}
		if err := u.t.removeAt(pfd, ent.Name(), child); err != nil {
			return err
		}
	}
	return nil
}

// Pending reports whether selected hard links wait for targets that were
// not selected; Materialize writes them from a second read of the layer.
func (u *Unpacker) Pending() bool { return len(u.pending) > 0 }

// Materialize reads the current layer again and writes each pending hard
// link's target (a regular file or symlink of that layer) at the first
// link, then links the others to it.
func (u *Unpacker) Materialize(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for len(u.pending) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("re-reading layer for hard links: %w", err)
		}
		parts, _ := CleanParts(hdr.Name)
		key := strings.Join(parts, "/")
		links, ok := u.pending[key]
		if !ok || (hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeSymlink) {
			continue
		}
		delete(u.pending, key)
		first := strings.Split(links[0], "/")
		if err := u.t.entry(first, hdr, tr, nil); err != nil {
			return fmt.Errorf("copying hard link target to %q: %w", links[0], err)
		}
		for _, l := range links[1:] {
			if err := u.t.entry(strings.Split(l, "/"), &tar.Header{Typeflag: tar.TypeLink}, nil, first); err != nil {
				return fmt.Errorf("unpacking %q: %w", l, err)
			}
		}
	}
	for target := range u.pending {
		return fmt.Errorf("hard link target %q is not a regular file of the same layer", target)
	}
	return nil
}

// Close applies directory metadata and releases the destination.
func (u *Unpacker) Close() error {
	defer u.t.close()
	return u.t.finish()
}

// Abort releases the destination without finishing it.
func (u *Unpacker) Abort() { u.t.close() }
