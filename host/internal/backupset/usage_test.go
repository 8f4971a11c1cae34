package backupset

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestDiskUsageByKind: each kind of the backups directory is the bytes
// of its own files: the chunk stores, a v2 backup, an incremental
// backup's record, an export with its .sha256; a file of another name is
// not counted.
func TestDiskUsageByKind(t *testing.T) {
	dir := t.TempDir()
	v2 := makeBackup(t, dir, "box", "2026-01-02 03:04", false)
	inc := makeBackup(t, dir, "box", "2026-01-03 03:04", true)
	archive := exportOf(t, dir, v2)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	tree := func(p string) int64 {
		var n int64
		must(t, filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				fi, ierr := d.Info()
				must(t, ierr)
				n += fi.Size()
			}
			return err
		}))
		return n
	}
	u, err := DiskUsage(dir)
	must(t, err)
	want := Usage{Stores: tree(filepath.Join(dir, ".chunks")), V2: tree(filepath.Join(dir, v2)), Records: tree(filepath.Join(dir, inc)),
		FilesBytes: tree(archive) + tree(archive+".sha256")}
	if u.Stores != want.Stores || u.V2 != want.V2 || u.Records != want.Records || u.FilesBytes != want.FilesBytes ||
		len(u.Files) != 1 || u.Files[0].Name != filepath.Base(archive) || u.Total() != want.Stores+want.V2+want.Records+want.FilesBytes {
		t.Fatalf("DiskUsage = %+v, want %+v", u, want)
	}
	if want.Stores == 0 || want.Records == 0 || want.V2 == 0 || want.Records >= want.Stores {
		t.Fatalf("the test's backups: %+v", want)
	}
}
