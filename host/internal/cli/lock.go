package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// lockFileName is the operation lock in the state dir.
const lockFileName = "operation.lock"

// staleArtifact names temporary files a crashed operation may leave in a
// directory. They are removed only while the operation lock is held, so a
// running operation never loses its own.
type staleArtifact struct {
	dir     func(a *app) string
	pattern *regexp.Regexp
}

// staleArtifacts lists every temporary name hermes-box creates. A suffix
// must be what os.CreateTemp or a process id produces: 1–10 digits, no
// leading zero.
var staleArtifacts = []staleArtifact{
	{dir: func(a *app) string { return a.cfg.ImagesDir() }, pattern: regexp.MustCompile(`^hermes-base\.tmp-[1-9][0-9]{0,9}(\.smolmachine)?$`)},
}

// prepareDirs creates the data directories with mode 0700.
func (a *app) prepareDirs() error {
	for _, dir := range []string{a.cfg.StateDir(), a.cfg.ImagesDir(), a.cfg.BackupsDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restricting %s: %w", dir, err)
		}
	}
	return nil
}

// lock takes the operation lock (an flock on <state>/operation.lock) without
// waiting, then reaps stale temporary artifacts. The returned function
// releases the lock.
func (a *app) lock() (func(), error) {
	if err := a.prepareDirs(); err != nil {
		return nil, err
	}
	path := filepath.Join(a.cfg.StateDir(), lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening operation lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another hermes-box operation is in progress (%s)", path)
		}
		return nil, fmt.Errorf("taking operation lock %s: %w", path, err)
	}
	a.reapStale()
	return func() { f.Close() }, nil
}

// reapStale removes the stale temporary artifacts; only regular files that
// match a pattern exactly are touched.
func (a *app) reapStale() {
	for _, s := range staleArtifacts {
		dir := s.dir(a)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !s.pattern.MatchString(e.Name()) || !e.Type().IsRegular() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil {
				a.ui.Warn("could not remove stale %s: %v", p, err)
				continue
			}
			a.ui.Info("removed stale %s", p)
		}
	}
}

// withLock runs fn under the operation lock.
func (a *app) withLock(fn func() error) error {
	unlock, err := a.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}
