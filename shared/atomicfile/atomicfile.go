// Package atomicfile writes files so that readers see either the old content
// or the new, never a part: a temp file in the same directory, fsync, rename,
// then fsync of the directory.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data, created with perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, bytesFill(data), perm, os.Rename)
}

// WriteNew creates path with data, complete or not at all. If path exists it
// is left alone and the error wraps fs.ErrExist, so two racing writers end
// up agreeing on the first one's content.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	return write(path, bytesFill(data), perm, linkThenRemove)
}

// WriteFrom replaces path with what fill writes. If fill fails nothing is
// replaced and the temp file is removed.
func WriteFrom(path string, fill func(io.Writer) error, perm os.FileMode) error {
	return write(path, fill, perm, os.Rename)
}

func bytesFill(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// linkThenRemove publishes tmp under path without ever replacing path.
func linkThenRemove(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}

func write(path string, fill func(io.Writer) error, perm os.FileMode, publish func(tmp, path string) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmp, err)
	}
	if err = fill(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = publish(tmp, path); err != nil {
		return fmt.Errorf("moving %s into place: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so a rename in it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// WriteLike replaces path with data, keeping like's permission bits and,
// when running as root, its owner; with like nil the file gets perm.
func WriteLike(path string, data []byte, like fs.FileInfo, perm os.FileMode) error {
	if like != nil {
		perm = like.Mode().Perm()
	}
	return WriteFrom(path, func(w io.Writer) error {
		if st, ok := statOf(like); ok && os.Geteuid() == 0 {
			f, isFile := w.(*os.File)
			if !isFile {
				return errors.New("cannot set owner: not a file")
			}
			if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
				return fmt.Errorf("setting owner: %w", err)
			}
		}
		_, err := w.Write(data)
		return err
	}, perm)
}

func statOf(fi fs.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}
