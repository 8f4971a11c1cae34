package box

import (
	"context"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backupset"
)

// ListBackups lists the backups, v2 and incremental (backupset.List):
// verify checks each fully, readData also re-hashes every chunk of the
// incremental ones; signatures against the project key (any signer's
// when there is no key yet).
func ListBackups(ctx context.Context, b *Box, verify, readData bool) ([]BackupEntry, error) {
	key, err := projectKeyIfAny(b)
	if err != nil {
		return nil, err
	}
	return backupset.List(ctx, b.cfg.BackupsDir(), backupset.ListOptions{Verify: verify, ReadData: readData, Key: key})
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
