package box

import (
	"context"

	"github.com/hermes-box/hermes-box/host/internal/backup"
)

// BackupEntry is one backup of the inventory (backup.Entry): the command
// line reaches the backup package through the box only.
type BackupEntry = backup.Entry

// CheckLabel refuses a snapshot label the backup's name cannot carry.
func CheckLabel(label string) error { return backup.CheckLabel(label) }

// Backups lists the backups below dir; deep verifies each.
func Backups(ctx context.Context, dir string, deep bool) ([]BackupEntry, error) {
	return backup.Inventory(ctx, dir, deep)
}

// DeleteBackup removes the backup name below dir (never the last good one
// of a machine unless force).
func DeleteBackup(ctx context.Context, dir, name string, force bool) (BackupEntry, error) {
	return backup.Delete(ctx, dir, name, force)
}
