package keys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to path through a temporary file in the same
// directory: the file gets perm (regardless of umask), is synced, and then
// renamed over path. With replace false an existing path is left alone and
// the error wraps fs.ErrExist. The directory is synced afterwards so the new
// name survives a crash.
func writeFileAtomic(path string, data []byte, perm os.FileMode, replace bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		// After a rename this removes nothing; after a link it removes
		// the temporary name only.
		if rmErr := os.Remove(tmpName); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = rmErr
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		tmp = nil
		return err
	}
	tmp = nil
	if err := publish(tmpName, path, replace); err != nil {
		return err
	}
	return syncDir(dir)
}

// publish gives the temporary file its final name. Without replace it uses a
// hard link, which fails with fs.ErrExist instead of overwriting.
func publish(tmpName, path string, replace bool) error {
	if replace {
		return os.Rename(tmpName, path)
	}
	if err := os.Link(tmpName, path); err != nil {
		return err
	}
	return nil
}

// syncDir flushes a directory's entries to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
