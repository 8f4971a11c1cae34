package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/box"
)

// osc52 writes "hello" to the terminal's clipboard.
const osc52 = "\x1b]52;c;aGVsbG8=\x07"

// TestBackupNamesAreText: what a box chose (an entry name in a backup's
// problem, a label, a name) reaches the terminal escaped, in every cell
// of `backups` (its STATE column under --verify) and every line of
// `backups repair`.
func TestBackupNamesAreText(t *testing.T) {
	var list strings.Builder
	entries := []box.BackupEntry{{Name: "box-" + osc52, Label: "l" + osc52, Machine: "m" + osc52, Created: time.Unix(1700000000, 0),
		Incremental: true, Verified: backup.StateInvalid, Problem: "rootfs: evil" + osc52 + ": chunk missing from the store"}}
	if err := printBackups(&list, "/backups", entries); err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	reps := []backupset.Repaired{{Machine: "m" + osc52, Unreadable: []string{"p" + osc52},
		Broken: []backup.Entry{{Name: "box-" + osc52, Problem: "rootfs: evil" + osc52}}}}
	if err := printRepair(&rep, reps); err != nil {
		t.Fatal(err)
	}
	err := brokenBackups(reps)
	for what, out := range map[string]string{"backups": list.String(), "backups repair": rep.String(), "its error": err.Error()} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s shows a control character raw:\n%q", what, out)
		}
		if !strings.Contains(out, `\x1b]52;c;aGVsbG8=\x07`) {
			t.Errorf("%s does not show the name escaped:\n%q", what, out)
		}
	}
}
