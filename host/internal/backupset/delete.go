package backupset

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// ErrLastGood is returned when a delete would remove the last good backup.
var ErrLastGood = errors.New("refusing to delete the last good backup")

// Deleted is what `backups delete` removed.
type Deleted struct {
	backup.Entry
	// Collected is the chunk store's collection after an incremental
	// backup went; NotCollected says why it did not run.
	Collected    *chunkstore.GCReport
	NotCollected string
}

// Delete removes the backup named name in dir (a directory name, with or
// without its suffix, or its path), v2 or incremental. It refuses the
// last good backup of its machine unless force is set: another backup
// counts as good only when it passes the full verification. The backup is
// unpublished by rename, then deleted; an incremental backup's chunks no
// other backup needs are then collected. The caller holds the operation
// lock.
func Delete(ctx context.Context, dir, name string, force bool, key ssh.PublicKey) (Deleted, error) {
	base := filepath.Base(strings.TrimSuffix(name, "/"))
	if !strings.HasSuffix(base, backup.Suffix) {
		base += backup.Suffix
	}
	entries, err := List(ctx, dir, ListOptions{Key: key})
	if err != nil {
		return Deleted{}, err
	}
	i := slices.IndexFunc(entries, func(e backup.Entry) bool { return e.Name == base })
	if i < 0 {
		return Deleted{}, fmt.Errorf("no backup named %s in %s (run `hermes-box backups` to list them)", base, dir)
	}
	d := Deleted{Entry: entries[i]}
	if d.Good() && !force && !anotherGood(ctx, dir, entries, d.Entry, key) {
		return d, fmt.Errorf("%w of %s, %s: pass --force to delete it anyway", ErrLastGood, d.Machine, d.Name)
	}
	if _, err := ReapPruned(dir); err != nil {
		return d, err
	}
	if err := removeBackup(d.Path); err != nil {
		return d, err
	}
	if d.Incremental {
		d.Collected, d.NotCollected, err = collect(ctx, dir, d.Machine, key, entries, nil)
	}
	return d, err
}

// anotherGood reports whether a backup of target's machine other than
// target passes the full verification.
func anotherGood(ctx context.Context, dir string, entries []backup.Entry, target backup.Entry, key ssh.PublicKey) bool {
	for _, e := range slices.Backward(entries) {
		if e.Name != target.Name && e.Good() && e.Machine == target.Machine && verifyEntry(ctx, dir, e, key) == nil {
			return true
		}
	}
	return false
}
