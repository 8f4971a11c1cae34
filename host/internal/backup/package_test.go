package backup

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRenameNoReplaceRefusesEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.Mkdir(a, 0o700))
	must(t, os.Mkdir(b, 0o700)) // a plain rename would replace it
	if err := renameNoReplace(a, b); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("renameNoReplace onto an empty dir: %v, want ErrExist", err)
	}
	must(t, renameNoReplace(a, filepath.Join(dir, "c")))
}

func TestPackage(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	dir, err := w.snapshot(t.Context(), "box", "pkg")
	must(t, err)
	v, err := Verify(t.Context(), dir, testTrust)
	must(t, err)
	base := filepath.Join(t.TempDir(), "hermes-base.smolmachine")
	must(t, os.WriteFile(base, []byte("artifact"), 0o600))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	p := &Package{
		Project:      []PackFile{{Name: "bin/hermes-box", Path: base, Mode: 0o755}},
		BaseArtifact: base, Backup: v, BackupName: filepath.Base(dir),
		Config: []byte("HERMES_BOX_SSH_KEY=\n"), Label: "to go", Now: now,
	}
	first, err := p.Write(t.Context(), w.m.backups)
	must(t, err)
	second, err := p.Write(t.Context(), w.m.backups)
	must(t, err)
	if filepath.Base(first) != "hermes-box-portable-20260102-030405-to-go.tar" || filepath.Base(second) != "hermes-box-portable-20260102-030405-to-go-2.tar" {
		t.Fatalf("archives %s, %s", first, second)
	}
	data, err := os.ReadFile(first)
	must(t, err)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:]) + "  " + filepath.Base(first) + "\n"
	if got, _ := os.ReadFile(first + ".sha256"); string(got) != want {
		t.Errorf("sha256 file %q, want %q", got, want)
	}
	var names []string
	tr := tar.NewReader(strings.NewReader(string(data)))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		names = append(names, h.Name)
	}
	for _, n := range []string{"hermes-box/bin/hermes-box", "hermes-box/hermes-box.conf", "hermes-box/images/hermes-base.smolmachine",
		"hermes-box/backups/" + filepath.Base(dir) + "/" + FileRootfs, "hermes-box/backups/" + filepath.Base(dir) + "/" + FileSums} {
		if !slices.Contains(names, n) {
			t.Errorf("package lacks %s (has %v)", n, names)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(w.m.backups, portablePrefix+"*")); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestReapSkipsWhatItDidNotMake(t *testing.T) {
	state, backups := t.TempDir(), t.TempDir()
	must(t, os.Mkdir(filepath.Join(state, stagePrefix+"123"), 0o500))
	write(t, backups, tempPrefix+"99/"+FileRootfs, "partial", 0o600)
	write(t, backups, tempPrefix+"7/notes.txt", "user file", 0o600)
	write(t, backups, tempPrefix+"0123/"+FileRootfs, "leading zero", 0o600)
	write(t, backups, portablePrefix+"5.tar.tmp", "x", 0o600)
	removed, err := Reap(state, backups)
	if err == nil || !strings.Contains(err.Error(), "unexpected entry") {
		t.Errorf("err %v, want a refusal for the unknown file", err)
	}
	if len(removed) != 3 {
		t.Errorf("removed %v, want 3", removed)
	}
	for _, keep := range []string{tempPrefix + "7/notes.txt", tempPrefix + "0123/" + FileRootfs} {
		if _, err := os.Stat(filepath.Join(backups, keep)); err != nil {
			t.Errorf("%s was removed", keep)
		}
	}
}
