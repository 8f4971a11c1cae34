package backupset

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// exportOf writes the export of the v2 backup name of dir into dir.
func exportOf(t *testing.T, dir, name string) string {
	t.Helper()
	v, err := backup.Verify(t.Context(), filepath.Join(dir, name), backup.Trust{Key: projectKey.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := v.WriteExport(t.Context(), dir, name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// TestImportExportRestoresTheBackup: an export, taken elsewhere, is
// unpacked into an empty backups directory as the backup it holds,
// verified; a damaged copy, an archive with a file no backup has or a
// path out of its directory, and one signed by another key are refused
// and leave the directory empty.
func TestImportExportRestoresTheBackup(t *testing.T) {
	src := t.TempDir()
	name := makeBackup(t, src, "box", "2026-01-02 03:04", false)
	archive := exportOf(t, src, name)
	trust := backup.Trust{Key: projectKey.PublicKey()}

	hostile := func(entries ...string) string {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range entries {
			if strings.HasSuffix(e, "/") {
				_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: e, Mode: 0o700})
				continue
			}
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e, Mode: 0o600, Size: 1})
			_, _ = tw.Write([]byte("x"))
		}
		_ = tw.Close()
		p := filepath.Join(t.TempDir(), backup.ExportPrefix+"x.tar")
		if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	damaged := filepath.Join(t.TempDir(), filepath.Base(archive))
	data, _ := os.ReadFile(archive)
	data[len(data)/2] ^= 1
	_ = os.WriteFile(damaged, data, 0o600)
	sums, _ := os.ReadFile(archive + ".sha256")
	_ = os.WriteFile(damaged+".sha256", sums, 0o600)
	for _, c := range []struct {
		name, archive, want string
		trust               backup.Trust
	}{
		{"damaged", damaged, "the copy is damaged", trust},
		{"escape", hostile("x.hermesbox/", "x.hermesbox/../evil"), "is not one of x.hermesbox's files", trust},
		{"other file", hostile("x.hermesbox/", "x.hermesbox/run.sh"), "is not one of x.hermesbox's files", trust},
		{"not a backup", hostile("etc/"), "is not a backup's directory", trust},
		// A manifest over what is read of it, refused before a byte of
		// it is written (a part's cap is no bound for it).
		{"big manifest", hostileSized(t, "x.hermesbox/"+backup.FileManifest, 2<<20), backup.FileManifest + " exceeds the limit of 1 MiB", trust},
		{"another key", archive, "not made with this project's key", backup.Trust{Key: signerFrom(2).PublicKey()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := t.TempDir()
			_, err := ImportExport(t.Context(), c.archive, dst, c.trust, testLimits)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if des, _ := os.ReadDir(dst); len(des) != 0 {
				t.Errorf("a refused archive left %v", des)
			}
		})
	}

	dst := t.TempDir()
	got, err := ImportExport(t.Context(), archive, dst, trust, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dst, name) {
		t.Errorf("imported as %s, want %s", got, filepath.Join(dst, name))
	}
	if _, err := backup.Verify(t.Context(), got, trust); err != nil {
		t.Errorf("the imported backup: %v", err)
	}
	// Imported again (a restore run again): the same backup, taken as
	// it is; another backup under that name is never replaced.
	if again, err := ImportExport(t.Context(), archive, dst, trust, testLimits); err != nil || again != got {
		t.Errorf("a second import: %s, %v", again, err)
	}
	if err := os.WriteFile(filepath.Join(got, backup.FileSums), []byte("changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportExport(t.Context(), archive, dst, trust, testLimits); err == nil || !strings.Contains(err.Error(), "is another backup of that name") {
		t.Errorf("an import over another backup: %v", err)
	}
}

// hostileSized is an export archive whose one file, entry, has size
// bytes.
func hostileSized(t *testing.T, entry string, size int) string {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.Dir(entry) + "/", Mode: 0o700})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: entry, Mode: 0o600, Size: int64(size)})
	_, _ = tw.Write(make([]byte, size))
	_ = tw.Close()
	p := filepath.Join(t.TempDir(), backup.ExportPrefix+"x.tar")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStagingACopiedStubNamesExport: an incremental backup's directory
// copied alone is refused, naming `backups export`, and nothing is
// created beside the copy.
func TestStagingACopiedStubNamesExport(t *testing.T) {
	src := t.TempDir()
	name := makeBackup(t, src, "box", "2026-01-02 03:04", true)
	usb := t.TempDir()
	if err := os.CopyFS(filepath.Join(usb, name), os.DirFS(filepath.Join(src, name))); err != nil {
		t.Fatal(err)
	}
	_, err := Stage(t.Context(), filepath.Join(usb, name), t.TempDir(), backup.Trust{Key: projectKey.PublicKey()}, testLimits,
		func() (ssh.Signer, error) { return projectKey, nil })
	var ue *userr.Error
	if err == nil || !strings.Contains(err.Error(), "its directory holds only its record") || !errors.As(err, &ue) ||
		!strings.Contains(ue.Next, "hermes-box backups export NAME") {
		t.Fatalf("staging a copied stub: %v", err)
	}
	if des, _ := os.ReadDir(usb); len(des) != 1 {
		t.Errorf("staging the stub left %v beside it", des)
	}
}

// TestImportExportReadsTheArchiveOnce: the archive (on a slow stick, say)
// is read once, hashed as it is unpacked. Here it is a pipe that gives
// the export to its first reader only: checking the .sha256 and then
// unpacking in a second read waits for a second copy that never comes
// (the test gives up on it after 20 s with an empty one).
func TestImportExportReadsTheArchiveOnce(t *testing.T) {
	src := t.TempDir()
	name := makeBackup(t, src, "box", "2026-01-02 03:04", false)
	archive := exportOf(t, src, name)
	good, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(t.TempDir(), filepath.Base(archive))
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	sums, _ := os.ReadFile(archive + ".sha256")
	if err := os.WriteFile(pipe+".sha256", sums, 0o600); err != nil {
		t.Fatal(err)
	}
	returned, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for _, data := range [][]byte{good, nil} {
			if data == nil {
				select {
				case <-returned:
					return
				case <-time.After(20 * time.Second):
				}
			}
			f, err := os.OpenFile(pipe, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			_, _ = f.Write(data)
			_ = f.Close()
		}
	}()
	dst := t.TempDir()
	_, err = ImportExport(t.Context(), pipe, dst, backup.Trust{Key: projectKey.PublicKey()}, testLimits)
	close(returned)
	<-done
	if err != nil {
		t.Fatalf("importing the export from a pipe that gives it once: %v", err)
	}
}
