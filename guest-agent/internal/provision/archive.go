package provision

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
)

// extractOpts control extractTarGz.
type extractOpts struct {
	// strip drops this many leading path components (tar --strip-components).
	strip int
	// uid and gid own everything extracted.
	uid, gid int
	// maxBytes bounds the total size of the extracted files.
	maxBytes int64
	// skip leaves out entries (slash paths after strip) and what is below
	// them; nil extracts everything.
	skip func(rel string) bool
}

// extractTarGz unpacks a verified .tar.gz into dest, which must exist,
// with tarfs.Extract: absolute names, "..", writes through links and links
// that resolve outside dest are refused. Modes are normalized (directories
// and executables 0755, other files 0644) and owners set to opts, the
// directories an archive without directory entries implies included.
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
	if opts.maxBytes <= 0 {
		opts.maxBytes = 2 << 30
	}
	res, err := tarfs.Extract(context.Background(), zr, dest, tarfs.Options{Strip: opts.strip, UID: -1, GID: -1,
		Mode: normalMode, MaxBytes: opts.maxBytes, LinksInside: true, Skip: opts.skip})
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	// Owners through the injectable Owner; no listed path runs through a
	// symlink that leads out (LinksInside), and its parents are directories
	// the extraction made or walked.
	owned := map[string]bool{".": true}
	for rel := range res.Listed {
		for r := rel; !owned[r]; r = path.Dir(r) {
			owned[r] = true
			if err := p.cfg.Owner.Lchown(filepath.Join(dest, filepath.FromSlash(r)), opts.uid, opts.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// normalMode is 0755 for directories and executables, 0644 otherwise.
func normalMode(h *tar.Header) uint32 {
	if h.Typeflag == tar.TypeDir || h.Mode&0o111 != 0 {
		return 0o755
	}
	return 0o644
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
