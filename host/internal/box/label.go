package box

import (
	"context"
	"slices"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/backup"
)

// unsafeRunes are the characters of label SanitizeLabel would drop or
// rewrite, each quoted once, in order.
func unsafeRunes(label string) []string {
	var out []string
	for _, r := range label {
		q := strconv.QuoteRune(r)
		if backup.SanitizeLabel(string(r)) != string(r) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// LatestBackup is the word restore takes for the newest backup.
const LatestBackup = "latest"

// backupByLabel is the newest good backup of the box's machine labelled
// label, or for "latest" the newest good one that is not a restore's
// safety snapshot; it says which it took when others carry the label too.
func backupByLabel(ctx context.Context, b *Box, label string) (BackupEntry, bool) {
	entries, _ := Backups(ctx, b, false)
	var found []BackupEntry
	for _, e := range entries {
		if !e.Good() || e.Machine != b.cfg.MachineName {
			continue
		}
		if e.Label == label || label == LatestBackup && e.Label != safetyLabel {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return BackupEntry{}, false
	}
	// Backups lists the oldest first.
	e := found[len(found)-1]
	if label == LatestBackup || len(found) > 1 {
		b.ui.Info("%s is %s, the newest of %d", label, e.Name, len(found))
	}
	return e, true
}
