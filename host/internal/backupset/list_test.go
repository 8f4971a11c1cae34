package backupset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// TestListChecksIncrementalBackups: the listing gives an incremental
// backup its own size and what it added; --verify finds a missing pack,
// and only --read-data finds a chunk whose bytes changed in place.
func TestListChecksIncrementalBackups(t *testing.T) {
	dir := t.TempDir()
	first := makeBackup(t, dir, "box", "2024-05-01 10:00", true)
	makeBackup(t, dir, "box", "2024-05-02 10:00", true)
	v2 := makeBackup(t, dir, "box", "2024-05-03 10:00", false)
	key := projectKey.PublicKey()
	entries, err := List(t.Context(), dir, ListOptions{Key: key})
	must(t, err)
	if len(entries) != 3 || entries[0].Name != first || entries[2].Name != v2 {
		t.Fatalf("listed %+v", entries)
	}
	a, b, c := entries[0], entries[1], entries[2]
	if !a.Incremental || a.Size < 900<<10 || a.Added <= 0 || a.Verified != backup.StateComplete {
		t.Errorf("first incremental: %+v", a)
	}
	// The second shares all but its own file (300 KiB of noise, stored as is).
	if b.Added <= 0 || b.Added >= a.Added/2 || b.Size != a.Size {
		t.Errorf("second incremental added %d (the first %d), size %d", b.Added, a.Added, b.Size)
	}
	if c.Incremental || c.Added != c.Size {
		t.Errorf("v2: %+v", c)
	}

	packs := filepath.Join(chunkstore.StoreDir(dir, "box"), "packs")
	des, err := os.ReadDir(packs)
	must(t, err)
	var biggest string
	var size int64
	for _, de := range des {
		if fi, err := de.Info(); err == nil && fi.Size() > size {
			biggest, size = filepath.Join(packs, de.Name()), fi.Size()
		}
	}
	data, err := os.ReadFile(biggest)
	must(t, err)
	data[100] ^= 0xff // inside the first blob: the header still reads
	must(t, os.Chmod(biggest, 0o600))
	must(t, os.WriteFile(biggest, data, 0o600))
	states := func(o ListOptions) string {
		o.Key = key
		entries, err := List(t.Context(), dir, o)
		must(t, err)
		var out []string
		for _, e := range entries[:2] {
			out = append(out, e.Verified)
		}
		return strings.Join(out, " ")
	}
	// --verify's sample reads a small store whole: the chunk is found
	// and set aside.
	if got := states(ListOptions{Verify: true}); got != "invalid invalid" {
		t.Errorf("--verify of a changed chunk: %s", got)
	}
	if got := states(ListOptions{ReadData: true}); got != "invalid invalid" {
		t.Errorf("--read-data of a changed chunk: %s", got)
	}
	must(t, os.Remove(biggest))
	if got := states(ListOptions{Verify: true}); got != "invalid invalid" {
		t.Errorf("--verify of a missing pack: %s", got)
	}
}
