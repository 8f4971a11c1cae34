package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/progress"
)

// stagePrefix names staged copies in the state directory; Reap removes
// stale ones.
const stagePrefix = ".restore-backup-"

// Staged is a verified, read-only copy of a backup in the state directory.
// Restore and package read only this copy, so a change to the source after
// it was checked cannot slip in.
type Staged struct {
	Verified
	// Source is the backup directory it was copied from.
	Source string
}

// Stage checks the signature of the backup in src as t says, before
// anything else, then the files' sizes against lim (each part within the
// part cap, all of them within the free space less the reserve), then
// copies it into a new directory below stateDir, hashing and listing every
// archive while copying it (new files only, O_EXCL; the free space checked
// as it goes), verifies the copy and makes it read-only. On failure
// nothing is left.
func Stage(ctx context.Context, src, stateDir string, t Trust, lim Limits) (s *Staged, err error) {
	ss, err := t.readSignedSums(src)
	if err != nil {
		return nil, err
	}
	sums := ss.sums
	lim = lim.withDefaults()
	dir, err := newStageDir(stateDir, func() error {
		if err := lim.checkStage(src, stateDir); err != nil {
			return fmt.Errorf("staging %s: %w", src, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = removeStaged(dir)
		}
	}()
	meta := []string{FileSums}
	if _, err := writeSmall(filepath.Join(dir, FileSums), ss.raw); err != nil {
		return nil, fmt.Errorf("staging backup: %w", err)
	}
	if ss.sig != nil {
		if _, err := writeSmall(filepath.Join(dir, FileSignature), ss.sig); err != nil {
			return nil, fmt.Errorf("staging backup: %w", err)
		}
		meta = append(meta, FileSignature)
	}
	sizes := map[string]int64{}
	for _, name := range Files {
		n, err := copyHashed(ctx, filepath.Join(src, name), filepath.Join(dir, name), sums[name], lim)
		if err != nil {
			return nil, err
		}
		sizes[name] = n
	}
	m, err := verifyContents(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := t.checkOrigin(m, ss.signer); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if err := seal(dir, append(meta, Files...)); err != nil {
		return nil, err
	}
	return &Staged{Verified: Verified{Dir: dir, Manifest: m, Sums: sums, Sizes: sizes, Signer: ss.signer}, Source: src}, nil
}

// newStageDir creates stateDir if need be and, once check passes, a new
// staging directory below it.
func newStageDir(stateDir string, check func() error) (string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("staging backup: %w", err)
	}
	if err := check(); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(stateDir, stagePrefix)
	if err != nil {
		return "", fmt.Errorf("staging backup: %w", err)
	}
	crashPoint("stage-created")
	return dir, nil
}

// seal makes the staged copy in dir read-only: its files names, then dir.
func seal(dir string, names []string) error {
	for _, name := range names {
		if err := os.Chmod(filepath.Join(dir, name), 0o400); err != nil {
			return fmt.Errorf("staging backup: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		return fmt.Errorf("staging backup: %w", err)
	}
	return nil
}

// copyHashed copies src to a new file dst and checks the SHA-256 of the
// bytes it copied. An archive is listed as it is copied, so one that is
// not a gzip tar fails within its first bytes, and the copy checks the
// part cap and the free space of dst's file system as it goes.
func copyHashed(ctx context.Context, src, dst, want string, lim Limits) (int64, error) {
	in, fi, err := openRegular(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	name := filepath.Base(src)
	copyTo := func(w io.Writer) error {
		done := func(error) {}
		if fi.Size() >= 1<<20 {
			w, done = progress.Track(ctx, "stage "+name, fi.Size(), w)
		}
		_, err := io.CopyBuffer(w, ctxReader{ctx, in}, make([]byte, 1<<20))
		done(err)
		return err
	}
	var sum string
	if name == FileRootfs || name == FileWorkspace {
		sum, _, err = writePart(ctx, dst, lim, func(w io.Writer) error {
			return copyTo(&partWriter{w: w, lim: lim, dir: filepath.Dir(dst), part: name})
		})
	} else {
		sum, err = copySmall(dst, copyTo)
	}
	if err != nil {
		return 0, fmt.Errorf("staging %s: %w", src, err)
	}
	if sum != want {
		return 0, fmt.Errorf("%w: checksum mismatch while staging: %s", ErrInvalid, src)
	}
	return fi.Size(), nil
}

// copySmall fills a new file dst (within the sizes checkStage allowed)
// and returns its SHA-256.
func copySmall(dst string, fill func(io.Writer) error) (string, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer out.Close()
	h := sha256.New()
	if err := fill(io.MultiWriter(out, h)); err != nil {
		return "", err
	}
	if err := out.Sync(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), out.Close()
}

// Remove deletes the staged copy.
func (s *Staged) Remove() error { return removeStaged(s.Dir) }

func removeStaged(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing staged backup: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing staged backup: %w", err)
	}
	return nil
}

// Open opens one file of the staged copy.
func (v *Verified) Open(name string) (*os.File, error) {
	f, _, err := openRegular(filepath.Join(v.Dir, name))
	return f, err
}
