package backupset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// PruneRequest is one `backups prune`.
type PruneRequest struct {
	Dir     string // the backups directory
	Machine string // only this machine's backups are considered
	Policy  Policy
	Key     ssh.PublicKey // the project's public key; nil: any signer
	DryRun  bool
	// Loc draws the days and weeks of the policy (time.Local when nil).
	Loc *time.Location
}

// Kept is a backup the policy keeps and why.
type Kept struct {
	backup.Entry
	Reasons []string `json:"reasons"`
}

// PruneReport says what a prune kept, removed (or, dry, would remove),
// left alone and collected.
type PruneReport struct {
	Machine string         `json:"machine"`
	Policy  Policy         `json:"policy"`
	DryRun  bool           `json:"dry_run"`
	Kept    []Kept         `json:"kept"`
	Removed []backup.Entry `json:"removed"`
	// Invalid are the machine's backups that are not good: prune leaves
	// them for `backups delete`.
	Invalid []backup.Entry `json:"invalid"`
	// Collected is the chunk store's garbage collection, when the machine
	// has one.
	Collected *chunkstore.GCReport `json:"collected,omitempty"`
	// NotCollected says why the store was not collected: an invalid
	// incremental backup, whose chunks cannot be told apart from garbage.
	NotCollected string `json:"not_collected,omitempty"`
	// Freed is the bytes the prune frees (a dry run: would free): the
	// v2 backups removed and what the store's collection frees, worked
	// out the same way for both (chunkstore.PlanCollect).
	Freed int64 `json:"freed"`
	// Reaped are directories an interrupted prune left unpublished,
	// removed now.
	Reaped []string `json:"reaped,omitempty"`
}

// prunedPrefix names a backup directory prune has unpublished: renamed
// out of the listing (the name no longer ends in backup.Suffix) before
// its files are deleted, so a crash never leaves a half-deleted directory
// under a backup's name.
const prunedPrefix = ".hermes-box-pruned-"

// crashPoint, when set (tests only), is called at each named step.
var crashPoint = func(string) {}

// Prune applies r.Policy to the good backups of r.Machine in r.Dir: the
// newest good backup must pass the full verification (a newer one that
// fails is set aside as invalid) and is always kept; each backup the
// policy does not keep is unpublished by rename, then deleted; then the
// machine's chunk store drops the chunks no remaining backup needs. The
// caller holds the operation lock. With r.DryRun nothing changes.
func Prune(ctx context.Context, r PruneRequest) (*PruneReport, error) {
	if err := r.Policy.Check(); err != nil {
		return nil, err
	}
	if r.Loc == nil {
		r.Loc = time.Local
	}
	rep := &PruneReport{Machine: r.Machine, Policy: r.Policy, DryRun: r.DryRun, Kept: []Kept{}, Removed: []backup.Entry{}, Invalid: []backup.Entry{}}
	if !r.DryRun {
		reaped, err := ReapPruned(r.Dir)
		rep.Reaped = reaped
		if err != nil {
			return rep, err
		}
	}
	good, err := r.goodBackups(ctx, rep)
	if err != nil {
		return rep, err
	}
	times := make([]time.Time, len(good))
	for i, e := range good {
		times[i] = e.Created
	}
	decisions := r.Policy.Apply(times, r.Loc)
	var remove []backup.Entry
	for i, e := range good {
		if len(decisions[i]) > 0 {
			rep.Kept = append(rep.Kept, Kept{e, decisions[i]})
		} else {
			remove = append(remove, e)
		}
	}
	if len(good) > 0 && len(decisions[len(good)-1]) == 0 {
		return rep, fmt.Errorf("pruning: the policy would remove the newest good backup %s", good[len(good)-1].Name)
	}
	if r.DryRun {
		rep.Removed = remove
		return rep, r.collect(ctx, rep)
	}
	for _, e := range remove {
		if err := removeBackup(e.Path); err != nil {
			return rep, err
		}
		rep.Removed = append(rep.Removed, e)
	}
	return rep, r.collect(ctx, rep)
}

// goodBackups lists the machine's backups, oldest first, that a restore
// can use; the others go into rep.Invalid. The newest of them is verified
// fully (every byte of a v2 backup, every chunk of an incremental one
// held): one that fails is invalid, and the next newest is tried.
func (r PruneRequest) goodBackups(ctx context.Context, rep *PruneReport) ([]backup.Entry, error) {
	all, err := List(ctx, r.Dir, ListOptions{Key: r.Key})
	if err != nil {
		return nil, err
	}
	var good []backup.Entry
	for _, e := range all {
		switch {
		case e.Machine != r.Machine:
		case e.Good():
			good = append(good, e)
		default:
			rep.Invalid = append(rep.Invalid, e)
		}
	}
	for len(good) > 0 {
		newest := good[len(good)-1]
		err := verifyEntry(ctx, r.Dir, newest, r.Key)
		if err == nil {
			break
		}
		newest.Verified, newest.Problem = backup.StateInvalid, err.Error()
		rep.Invalid = append(rep.Invalid, newest)
		good = good[:len(good)-1]
	}
	return good, nil
}

// collect runs the machine's chunk store's garbage collection, when it
// has a store (a dry run: works out what it would free once rep.Removed
// are gone, by the plan the collection follows), and adds up rep.Freed.
func (r PruneRequest) collect(ctx context.Context, rep *PruneReport) (err error) {
	var gone map[string]bool
	if r.DryRun {
		gone = map[string]bool{}
	}
	for _, e := range rep.Removed {
		if gone != nil {
			gone[e.Path] = true
		}
		if !e.Incremental {
			rep.Freed += e.Size
		}
	}
	rep.Collected, rep.NotCollected, err = collect(ctx, r.Dir, r.Machine, r.Key, rep.Invalid, gone)
	if rep.Collected != nil {
		rep.Freed += rep.Collected.BytesFreed
	}
	return err
}

// collect runs the chunk store's garbage collection of machine in dir,
// when it has a store, unless one of entries is an invalid incremental
// backup of it (whose chunks cannot be told from garbage): then it says
// why not. A non-nil gone plans it instead (chunkstore.PlanCollect),
// changing nothing, as if the backups it names were deleted.
func collect(ctx context.Context, dir, machine string, key ssh.PublicKey, entries []backup.Entry, gone map[string]bool) (*chunkstore.GCReport, string, error) {
	if _, err := os.Stat(chunkstore.StoreDir(dir, machine)); errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	for _, e := range entries {
		if e.Incremental && !e.Good() && e.Machine == machine {
			return nil, fmt.Sprintf("the incremental backup %s is invalid (%s): once it is deleted (hermes-box backups delete) or the store repaired, the next prune collects",
				e.Name, e.Problem), nil
		}
	}
	var gc chunkstore.GCReport
	var err error
	if gone != nil {
		gc, err = chunkstore.PlanCollect(ctx, dir, machine, backup.Trust{Key: key}, gone)
	} else {
		gc, err = chunkstore.Collect(ctx, dir, machine, backup.Trust{Key: key})
	}
	if err != nil {
		return nil, "", err
	}
	return &gc, "", nil
}

// removeBackup unpublishes the backup directory path by renaming it to
// prunedPrefix+its name, then deletes it.
func removeBackup(path string) error {
	hidden := filepath.Join(filepath.Dir(path), prunedPrefix+strings.TrimSuffix(filepath.Base(path), backup.Suffix))
	if err := os.Rename(path, hidden); err != nil {
		return fmt.Errorf("pruning %s: %w", path, err)
	}
	crashPoint("unpublished")
	return removeUnpublished(hidden)
}

// removeUnpublished deletes an unpublished backup directory, which holds
// only regular files, one file at a time.
func removeUnpublished(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pruning: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pruning: %w", err)
	}
	for _, de := range des {
		if !de.Type().IsRegular() {
			return fmt.Errorf("pruning: %s holds %s, not a backup's file: delete it by hand", dir, de.Name())
		}
	}
	for _, de := range des {
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("pruning: %w", err)
		}
		crashPoint("file-removed")
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("pruning: %w", err)
	}
	return nil
}

// ReapPruned removes the backup directories an interrupted prune left
// unpublished in dir. Call it while holding the operation lock.
func ReapPruned(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, de := range des {
		if !de.IsDir() || !strings.HasPrefix(de.Name(), prunedPrefix) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if err := removeUnpublished(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
