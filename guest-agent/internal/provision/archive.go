package provision

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// extractOpts control extractTarGz.
type extractOpts struct {
	// strip drops this many leading path components (tar --strip-components).
	strip int
	// uid and gid own everything extracted.
	uid, gid int
	// maxBytes bounds the total size of the extracted files.
	maxBytes int64
}

// extractTarGz unpacks a verified .tar.gz into dest, which must exist. Every
// path must stay inside dest: absolute names, "..", links pointing out and
// writes through links are refused. Modes are normalized (directories and
// executables 0755, other files 0644) and owners set to opts.
func (p *Provisioner) extractTarGz(archive, dest string, opts extractOpts) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("opening %s: %w", archive, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", archive, err)
	}
	defer zr.Close()
	if dest, err = filepath.EvalSymlinks(dest); err != nil {
		return fmt.Errorf("resolving %s: %w", dest, err)
	}
	if opts.maxBytes <= 0 {
		opts.maxBytes = 2 << 30
	}
	budget := opts.maxBytes
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", archive, err)
		}
		name, ok, err := entryName(h.Name, opts.strip)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		if !ok {
			continue
		}
		if err := p.extractEntry(tr, h, dest, name, opts, &budget); err != nil {
			return fmt.Errorf("%s: entry %q: %w", archive, h.Name, err)
		}
	}
}

// entryName cleans an archive path and strips components; ok is false for
// entries that vanish with the strip.
func entryName(raw string, strip int) (string, bool, error) {
	if strings.HasPrefix(raw, "/") {
		return "", false, fmt.Errorf("absolute path %q in archive", raw)
	}
	parts := strings.Split(strings.Trim(raw, "/"), "/")
	var kept []string
	for _, part := range parts {
		switch part {
		case "", ".":
			continue
		case "..":
			return "", false, fmt.Errorf("path %q leaves the archive", raw)
		}
		kept = append(kept, part)
	}
	if len(kept) <= strip {
		return "", false, nil
	}
	return filepath.Join(kept[strip:]...), true, nil
}

func (p *Provisioner) extractEntry(r io.Reader, h *tar.Header, dest, name string, opts extractOpts, budget *int64) error {
	target := filepath.Join(dest, name)
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	resolved, err := filepath.EvalSymlinks(parent)
	if err != nil || !within(dest, resolved) {
		return fmt.Errorf("its directory leads outside the destination")
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(target, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		if h.Size > *budget {
			return fmt.Errorf("archive expands beyond %d bytes", opts.maxBytes)
		}
		*budget -= h.Size
		mode := os.FileMode(0o644)
		if h.Mode&0o111 != 0 {
			mode = 0o755
		}
		if err := writeEntry(target, r, h.Size, mode); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if filepath.IsAbs(h.Linkname) || !within(dest, filepath.Join(resolved, h.Linkname)) {
			return fmt.Errorf("link to %q points outside the destination", h.Linkname)
		}
		_ = os.Remove(target)
		if err := os.Symlink(h.Linkname, target); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported entry type %q", h.Typeflag)
	}
	return p.cfg.Owner.Lchown(target, opts.uid, opts.gid)
}

func writeEntry(target string, r io.Reader, size int64, mode os.FileMode) error {
	_ = os.Remove(target)
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// within reports whether path is dir or below it (both cleaned).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// stagingDir creates an empty directory beside final, for an extraction
// that is renamed into place once verified.
func stagingDir(final string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("creating the parent of %s: %w", final, err)
	}
	d, err := os.MkdirTemp(filepath.Dir(final), "."+filepath.Base(final)+".new-")
	if err != nil {
		return "", fmt.Errorf("creating a staging directory for %s: %w", final, err)
	}
	return d, nil
}

// swapIn renames staged over final; an old final is moved aside first and
// removed once the new one is in place.
func swapIn(staged, final string) error {
	old := ""
	if exists(final) {
		old = final + ".old"
		_ = os.RemoveAll(old)
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("moving the old %s aside: %w", final, err)
		}
	}
	if err := os.Rename(staged, final); err != nil {
		if old != "" {
			_ = os.Rename(old, final)
		}
		return fmt.Errorf("installing %s: %w", final, err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	return nil
}
