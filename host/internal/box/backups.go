package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// BackupEntry is one backup of the inventory (backup.Entry): the command
// line reaches the backup package through the box only.
type BackupEntry = backup.Entry

// BackupComplete is the state of an entry checked without --verify.
const BackupComplete = backup.StateComplete

// MaxLabelBytes bounds a snapshot label as it goes into the backup's name
// (and a package's), far inside a file name's 255 bytes.
const MaxLabelBytes = 64

// CheckLabel refuses a snapshot label the backup's name cannot carry: a
// reserved word, or one too long. It runs before any work, so a label
// never fails after a whole backup was written.
func CheckLabel(label string) error {
	if err := backup.CheckLabel(label); err != nil {
		return err
	}
	// A label goes into a file name as it is: one that would have to be
	// rewritten ("../../etc" was "....etc") is refused, not changed.
	if clean := backup.SanitizeLabel(label); clean != label {
		return fmt.Errorf("the label %q has characters a backup's name cannot carry (%s): a label is letters, digits, '.', '_' and '-'",
			label, strings.Join(unsafeRunes(label), " "))
	}
	if n := len(backup.SanitizeLabel(label)); n > MaxLabelBytes {
		return fmt.Errorf("the label is %d characters long; a label has at most %d", n, MaxLabelBytes)
	}
	return nil
}

// Backups lists the backups; deep verifies each, its signature against
// the project key first (any signer's when there is no key yet).
func Backups(ctx context.Context, b *Box, deep bool) ([]BackupEntry, error) {
	return ListBackups(ctx, b, deep, false)
}

// DeleteBackup removes the backup name (never the last good one of a
// machine unless force).
func DeleteBackup(ctx context.Context, b *Box, name string, force bool) (backupset.Deleted, error) {
	key, err := projectKeyIfAny(b)
	if err != nil {
		return backupset.Deleted{}, err
	}
	return backupset.Delete(ctx, b.cfg.BackupsDir(), name, force, key)
}

// projectKeyIfAny is the project's public key, nil when there is none.
func projectKeyIfAny(b *Box) (ssh.PublicKey, error) {
	env, err := loadBackupRun(b)
	if errors.Is(err, userr.ErrNoBox) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return env.key, nil
}

// BackupNames are the names `backups` prints, for completion.
func BackupNames(ctx context.Context, b *Box) []string {
	entries, _ := Backups(ctx, b, false)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names
}

// ResolveBackup is ResolveBackupIn on a context of its own.
func ResolveBackup(b *Box, arg string) (string, error) {
	return ResolveBackupIn(context.Background(), b, arg)
}

// ResolveBackupIn turns what a user gave for a backup into its path: a path
// that exists is taken as it is; a bare name is one `backups` prints (with
// or without its .hermesbox suffix) in the backups directory; else
// "latest" or a label (backupByLabel).
func ResolveBackupIn(ctx context.Context, b *Box, arg string) (string, error) {
	if arg == "" {
		return "", userr.Usage("a backup is needed: a name `hermes-box backups` prints, or a path")
	}
	if _, err := os.Stat(arg); err == nil || strings.ContainsRune(arg, filepath.Separator) {
		return filepath.Abs(arg)
	}
	name := arg
	if !strings.HasSuffix(name, backup.Suffix) {
		name += backup.Suffix
	}
	p := filepath.Join(b.cfg.BackupsDir(), name)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		if e, ok := backupByLabel(ctx, b, arg); ok {
			return e.Path, nil
		}
		return "", userr.WithHint(fmt.Errorf("no backup named %s in %s", arg, b.cfg.BackupsDir()),
			"hermes-box backups lists the backups by name and label; latest is the newest")
	}
	return p, nil
}

// LastGoodBackup is the newest backup of the box's machine that is not
// invalid (without a full verification); ok is false when there is none.
func LastGoodBackup(ctx context.Context, b *Box) (e BackupEntry, ok bool) {
	entries, _ := Backups(ctx, b, false)
	for _, e := range slices.Backward(entries) {
		if e.Good() && e.Machine == b.cfg.MachineName {
			return e, true
		}
	}
	return BackupEntry{}, false
}
