package box

import (
	"context"
	"errors"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// BackupEntry is one backup of the inventory (backup.Entry): the command
// line reaches the backup package through the box only.
type BackupEntry = backup.Entry

// BackupComplete is the state of an entry checked without --verify.
const BackupComplete = backup.StateComplete

// CheckLabel refuses a snapshot label the backup's name cannot carry.
func CheckLabel(label string) error { return backup.CheckLabel(label) }

// Backups lists the backups; deep verifies each, its signature against
// the project key first (any signer's when there is no key yet).
func (b *Box) Backups(ctx context.Context, deep bool) ([]BackupEntry, error) {
	key, err := b.projectKeyIfAny()
	if err != nil {
		return nil, err
	}
	return backup.Inventory(ctx, b.cfg.BackupsDir(), deep, key)
}

// DeleteBackup removes the backup name (never the last good one of a
// machine unless force).
func (b *Box) DeleteBackup(ctx context.Context, name string, force bool) (BackupEntry, error) {
	key, err := b.projectKeyIfAny()
	if err != nil {
		return BackupEntry{}, err
	}
	return backup.Delete(ctx, b.cfg.BackupsDir(), name, force, key)
}

// projectKeyIfAny is the project's public key, nil when there is none.
func (b *Box) projectKeyIfAny() (ssh.PublicKey, error) {
	env, err := b.backupRun()
	if errors.Is(err, userr.ErrNoBox) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return env.key, nil
}
