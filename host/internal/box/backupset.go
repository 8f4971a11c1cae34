package box

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/progress"
)

// ListBackups lists the backups, v2 and incremental (backupset.List):
// verify checks each fully, readData also re-hashes every chunk of the
// incremental ones; signatures against the project key (any signer's
// when there is no key yet). A verification sets aside the corrupt
// chunks it finds (the store's quarantine file, which every writer of
// the store reads), so it runs under the operation lock as every
// command that writes a store does; a plain listing reads and takes no
// lock.
func ListBackups(ctx context.Context, b *Box, verify, readData bool) ([]BackupEntry, error) {
	key, err := projectKeyIfAny(b)
	if err != nil {
		return nil, err
	}
	o := backupset.ListOptions{Verify: verify, ReadData: readData, Key: key}
	if !verify && !readData {
		return backupset.List(ctx, b.cfg.BackupsDir(), o)
	}
	var out []BackupEntry
	err = withLock(b, func() error {
		out, err = backupset.List(ctx, b.cfg.BackupsDir(), o)
		return err
	})
	return out, err
}

// PruneBackups applies p to the box's machine's backups under the
// operation lock (backupset.Prune).
func PruneBackups(ctx context.Context, b *Box, p backupset.Policy, dryRun bool) (*backupset.PruneReport, error) {
	key, err := projectKeyIfAny(b)
	if err != nil {
		return nil, err
	}
	var rep *backupset.PruneReport
	err = withLock(b, func() error {
		rep, err = backupset.Prune(ctx, backupset.PruneRequest{Dir: b.cfg.BackupsDir(), Machine: b.cfg.MachineName,
			Policy: p, Key: key, DryRun: dryRun})
		return err
	})
	return rep, err
}

// RepairBackups rebuilds the chunk stores' indexes under the operation
// lock (backupset.Repair; force drops chunks backups need).
func RepairBackups(ctx context.Context, b *Box, force bool) ([]backupset.Repaired, error) {
	key, err := projectKeyIfAny(b)
	if err != nil {
		return nil, err
	}
	var out []backupset.Repaired
	err = withLock(b, func() error {
		out, err = backupset.Repair(ctx, b.cfg.BackupsDir(), key, force)
		return err
	})
	return out, err
}

// ExportBackup writes the backup src (a path) as one file in the backups
// directory (backup.Verified.WriteExport): an incremental backup is
// staged from its chunks (every one re-hashed) as a v2 one signed by the
// project key; a v2 one is verified and staged. It returns the file.
func ExportBackup(ctx context.Context, b *Box, src string) (string, error) {
	env, err := loadBackupRun(b)
	if err != nil {
		return "", err
	}
	var archive string
	err = withLock(b, func() error {
		staged, err := backupset.Stage(ctx, src, b.cfg.StateDir(), env.trust(false), env.limits(), env.signer)
		if err != nil {
			return err
		}
		defer staged.Remove()
		archive, err = staged.WriteExport(ctx, b.cfg.BackupsDir(), filepath.Base(src), time.Now())
		return err
	})
	return archive, err
}

// AutoPrune applies the configuration's retention policy
// (HERMES_BOX_PRUNE_KEEP_*) as `backups prune` does, after a snapshot;
// it returns nil when the policy is off (the default).
func AutoPrune(ctx context.Context, b *Box) (*backupset.PruneReport, error) {
	c := b.cfg
	if !c.AutoPrune() {
		return nil, nil
	}
	return PruneBackups(ctx, b, backupset.Policy{Last: c.PruneKeepLast, Daily: c.PruneKeepDaily, Weekly: c.PruneKeepWeekly}, false)
}

// BackupsUsage is what the backups directory holds on disk: the chunk
// stores, the backups, the exports and packages (backupset.DiskUsage).
func BackupsUsage(b *Box) (backupset.Usage, error) {
	return backupset.DiskUsage(b.cfg.BackupsDir())
}

// BackupSize says how big the backup e is: a v2 backup, its size; an
// incremental one, what it added to the store when it was taken (what
// deleting it alone can free at most) and what it restores to.
func BackupSize(e BackupEntry) string {
	if e.Incremental {
		return fmt.Sprintf("added %s to the store; restores to %s", progress.Bytes(e.Added), progress.Bytes(e.Size))
	}
	return progress.Bytes(e.Size) + ", self-contained"
}

// DescribeBackup is the listing's entry of the backup at path (its
// record or manifest read, not verified); ok is false when the listing
// lacks it.
func DescribeBackup(ctx context.Context, b *Box, path string) (e BackupEntry, ok bool) {
	entries, _ := Backups(ctx, b, false)
	for _, e := range entries {
		if e.Path == path {
			return e, true
		}
	}
	return BackupEntry{}, false
}
