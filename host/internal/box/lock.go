package box

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// staleArtifact names temporary files a crashed operation may leave in a
// directory. They are removed only while the operation lock is held, so a
// running operation never loses its own.
type staleArtifact struct {
	dir     func(b *Box) string
	pattern *regexp.Regexp
}

// staleArtifacts lists every temporary name hermes-box creates. A suffix
// must be what os.CreateTemp or a process id produces: 1–10 digits, no
// leading zero.
var staleArtifacts = []staleArtifact{
	{dir: func(b *Box) string { return b.cfg.ImagesDir() }, pattern: regexp.MustCompile(`^` + regexp.QuoteMeta(filenames.BaseArtifactTemp) + `[1-9][0-9]{0,9}(\.smolmachine)?$`)},
}

// prepareDirs creates the data directories with mode 0700.
func prepareDirs(b *Box) error {
	for _, dir := range []string{b.cfg.StateDir(), b.cfg.ImagesDir(), b.cfg.BackupsDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restricting %s: %w", dir, err)
		}
	}
	return nil
}

// lock takes the operation lock (backup.Lock: an flock on
// <state>/operation.lock, one lock for every mutating command) without
// waiting, then reaps what an interrupted operation left: stale temporary
// artifacts of init, staged copies, unpublished backups and portable temp
// files. The returned function removes the holder file and releases the
// lock.
func lock(b *Box) (func(), error) {
	if err := prepareDirs(b); err != nil {
		return nil, err
	}
	unlock, err := backup.Lock(b.cfg.StateDir())
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, lockHeld(b)
	}
	if err != nil {
		return nil, err
	}
	recordHolder(b)
	reapStale(b)
	removed, err := backup.Reap(b.cfg.StateDir(), b.cfg.BackupsDir())
	for _, p := range removed {
		b.ui.Info("removed stale %s", p)
	}
	if err != nil {
		b.ui.Warn("could not reap every leftover of an interrupted operation: %v", err)
	}
	return func() {
		// The holder goes with the lock: a holder file left behind names
		// a pid that another process may have later, and status would say
		// busy (operationInProgress). Only a killed run leaves it.
		_ = os.Remove(filepath.Join(b.cfg.StateDir(), filenames.OperationHolder))
		unlock()
	}, nil
}

// recordHolder writes who holds the lock, for a command refused meanwhile.
func recordHolder(b *Box) {
	text := fmt.Sprintf("pid %d: %s (since %s)\n", os.Getpid(), strings.Join(os.Args, " "), time.Now().UTC().Format("15:04:05 UTC"))
	if err := atomicfile.Write(filepath.Join(b.cfg.StateDir(), filenames.OperationHolder), []byte(text), 0o600); err != nil {
		b.ui.Warn("could not record the operation holding the lock: %v", err)
	}
}

// lockHeld is the error of a command refused because another operation
// holds the lock: which one, and what to do.
func lockHeld(b *Box) error {
	holder := "an operation whose command is not recorded"
	if text, rerr := os.ReadFile(filepath.Join(b.cfg.StateDir(), filenames.OperationHolder)); rerr == nil && len(text) > 0 {
		holder = termsafe.String(strings.TrimSpace(string(text)))
	}
	return userr.WithHint(fmt.Errorf("another hermes-box operation is in progress: %s; it holds %s", holder,
		filepath.Join(b.cfg.StateDir(), filenames.OperationLock)),
		"wait until it ends (or stop it with Ctrl-C in its terminal), then run this command again")
}

// reapStale removes the stale temporary artifacts; only regular files that
// match a pattern exactly are touched.
func reapStale(b *Box) {
	for _, s := range staleArtifacts {
		dir := s.dir(b)
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
				b.ui.Warn("could not remove stale %s: %v", p, err)
				continue
			}
			b.ui.Info("removed stale %s", p)
		}
	}
}

// withLock runs fn under the operation lock, unless a restore's cut-over
// was interrupted: then the box may be missing or half restored, and
// nothing but the restore that recovers it runs (see withLockResuming).
func withLock(b *Box, fn func() error) error {
	return withLockResuming(b, "", fn)
}

// withLockResuming is withLock for a restore of the backup resume, which is
// allowed to run after an interrupted cut-over when resume is the safety
// snapshot its journal names.
func withLockResuming(b *Box, resume string, fn func() error) error {
	unlock, err := lock(b)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkInterruptedRestore(b, resume); err != nil {
		return err
	}
	return fn()
}

// checkInterruptedRestore refuses while the restore journal stands, naming
// the safety snapshot that holds the original box and how to recover.
func checkInterruptedRestore(b *Box, resume string) error {
	journal := filepath.Join(b.cfg.StateDir(), filenames.RestoreJournal)
	safety, err := backup.Interrupted(b.cfg.StateDir())
	switch {
	case err != nil:
		return fmt.Errorf("reading the journal of an interrupted restore: %w; inspect or remove %s", err, journal)
	case safety == "":
		return nil
	case safety == resume:
		b.ui.Warn("recovering the original machine of an interrupted restore from %s", safety)
		return nil
	}
	return fmt.Errorf("an interrupted restore left the original machine in the backup %s; "+
		"recover it with `hermes-box restore %s` (or remove %s to abandon that restore)", safety, safety, journal)
}
