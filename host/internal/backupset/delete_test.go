package backupset

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// TestDeleteKeepsTheLastGoodBackup: a damaged backup does not count as
// another good one; the last good backup of a machine, v2 or incremental,
// goes only with force; an incremental backup counts as good for a v2
// one and the reverse; deleting an incremental backup collects the
// chunks only it needed.
func TestDeleteKeepsTheLastGoodBackup(t *testing.T) {
	dir := t.TempDir()
	key := projectKey.PublicKey()
	v2 := makeBackup(t, dir, "box", "2024-05-01 10:00", false)
	damaged := makeBackup(t, dir, "box", "2024-05-02 10:00", false)
	flipByte(t, filepath.Join(dir, damaged, backup.FileRootfs))
	other := makeBackup(t, dir, "other", "2024-05-02 11:00", true)

	if _, err := Delete(t.Context(), dir, v2, false, key); !errors.Is(err, ErrLastGood) {
		t.Fatalf("deleting the only good backup: %v, want ErrLastGood", err)
	}
	if _, err := Delete(t.Context(), dir, damaged, false, key); err != nil {
		t.Fatalf("deleting the damaged one: %v", err)
	}
	if _, err := Delete(t.Context(), dir, strings.TrimSuffix(v2, backup.Suffix), false, key); !errors.Is(err, ErrLastGood) {
		t.Fatalf("deleting the last good backup by its bare name: %v, want ErrLastGood", err)
	}
	if _, err := Delete(t.Context(), dir, "nope", false, key); err == nil || !strings.Contains(err.Error(), "hermes-box backups") {
		t.Fatalf("unknown backup: %v", err)
	}

	inc := makeBackup(t, dir, "box", "2024-05-03 10:00", true)
	store := chunkstore.StoreDir(dir, "box")
	if _, err := Delete(t.Context(), dir, v2, false, key); err != nil {
		t.Fatalf("deleting the v2 backup beside a good incremental one: %v", err)
	}
	if _, err := Delete(t.Context(), dir, inc, false, key); !errors.Is(err, ErrLastGood) {
		t.Fatalf("deleting the last good incremental backup: %v, want ErrLastGood", err)
	}
	if storeLen(t, store) == 0 {
		t.Fatal("the store is empty before the forced delete")
	}
	d, err := Delete(t.Context(), dir, inc, true, key)
	if err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if d.Collected == nil || d.Collected.ChunksRemoved == 0 || storeLen(t, store) != 0 {
		t.Errorf("the deleted incremental backup's chunks are still held: %+v", d.Collected)
	}
	if got := names(t, dir); !slices.Equal(got, []string{other}) {
		t.Errorf("left %v, want %v", got, []string{other})
	}
	if _, err := os.Stat(chunkstore.StoreDir(dir, "other")); err != nil {
		t.Errorf("the other machine's store: %v", err)
	}
	mustVerifyAll(t, dir)
}
