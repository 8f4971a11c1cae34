package backupset

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// TestRepairRefusesToDropLiveChunks: the pack holding the first backup's
// rootfs has its header damaged (its chunks still read through the
// index). Repair names both backups as losing rootfs files and leaves
// the store as it was, both still whole; forced, it rebuilds and both
// are broken.
func TestRepairRefusesToDropLiveChunks(t *testing.T) {
	dir := t.TempDir()
	first := makeBackup(t, dir, "box", "2024-05-01 10:00", true)
	second := makeBackup(t, dir, "box", "2024-05-02 10:00", true)
	key := projectKey.PublicKey()
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
	data[len(data)-9] ^= 0xff // the entry count's high byte: the header does not read
	must(t, os.Chmod(biggest, 0o600))
	must(t, os.WriteFile(biggest, data, 0o600))
	snapshotOf := func() []string {
		var out []string
		for _, sub := range []string{"packs", "index"} {
			des, err := os.ReadDir(filepath.Join(chunkstore.StoreDir(dir, "box"), sub))
			must(t, err)
			for _, de := range des {
				out = append(out, sub+"/"+de.Name())
			}
		}
		return out
	}
	before := snapshotOf()

	reps, err := Repair(t.Context(), dir, key, false)
	must(t, err)
	if len(reps) != 1 || !reps[0].Refused || len(reps[0].Losses) != 2 || len(reps[0].Whole) != 2 {
		t.Fatalf("repair without force: %+v", reps)
	}
	for i, name := range []string{first, second} {
		if l := reps[0].Losses[i]; l.Backup != name || !slices.Contains(l.Files, "usr/lib/shared.so") && !l.Tree {
			t.Errorf("loss %+v: want %s's rootfs named", l, name)
		}
	}
	if after := snapshotOf(); !slices.Equal(after, before) {
		t.Fatalf("a refused repair changed the store:\n%v\nwas\n%v", after, before)
	}

	reps, err = Repair(t.Context(), dir, key, true)
	must(t, err)
	if len(reps) != 1 || reps[0].Refused || len(reps[0].Losses) != 2 || len(reps[0].Broken) != 2 {
		t.Fatalf("forced repair: %+v", reps)
	}
}
