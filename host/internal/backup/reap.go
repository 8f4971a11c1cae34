package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/filenames"
)

// Lock takes the host's operation lock (an exclusive flock on
// <stateDir>/operation.lock), failing at once when another operation holds
// it. The lock dies with the process, so a killed operation never leaves
// it held. Call unlock when done.
func Lock(stateDir string) (unlock func(), err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("taking operation lock: %w", err)
	}
	path := filepath.Join(stateDir, filenames.OperationLock)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("taking operation lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another hermes-box operation is in progress (%s): %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// Reap removes what an interrupted operation left: staged copies in
// stateDir, unpublished backups and portable temp files in backupsDir.
// Only names exactly as os.MkdirTemp/CreateTemp made them, holding only
// backup files, are touched. Call it while holding the lock.
func Reap(stateDir, backupsDir string) (removed []string, err error) {
	var errs []error
	for _, d := range []struct {
		dir, prefix, suffix string
		isDir               bool
	}{
		{stateDir, stagePrefix, "", true},
		{backupsDir, tempPrefix, "", true},
		{backupsDir, portablePrefix, ".tar.tmp", false},
		{backupsDir, portablePrefix, ".sha256.tmp", false},
	} {
		entries, err := os.ReadDir(d.dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if !tempName(e.Name(), d.prefix, d.suffix) {
				continue
			}
			p := filepath.Join(d.dir, e.Name())
			if err := reapOne(p, d.isDir); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, p)
		}
	}
	return removed, errors.Join(errs...)
}

// tempName matches prefix + a random suffix of os.MkdirTemp (1–10 digits,
// no leading zero, fits uint32) + suffix.
func tempName(name, prefix, suffix string) bool {
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	if mid, ok = strings.CutSuffix(mid, suffix); !ok || mid == "" || len(mid) > 10 || mid[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(mid, 10, 32)
	return err == nil
}

func reapOne(p string, isDir bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !isDir {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("not reaping %s: not a regular file", p)
		}
		return os.Remove(p)
	}
	if !fi.IsDir() {
		return fmt.Errorf("not reaping %s: not a directory", p)
	}
	allowed := map[string]bool{FileSums: true, FileSignature: true}
	for _, f := range Files {
		allowed[f] = true
	}
	if err := os.Chmod(p, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !allowed[e.Name()] || !e.Type().IsRegular() {
			return fmt.Errorf("not reaping %s: unexpected entry %q", p, e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(p, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(p)
}
