package backup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckLabel(t *testing.T) {
	for _, tc := range []struct {
		label string
		ok    bool
	}{
		{"manual", true}, {"before-upgrade", true}, {"list", false}, {"LIST", false}, {" delete ", false}, {"", false}, {"listing", true},
	} {
		if err := CheckLabel(tc.label); (err == nil) != tc.ok {
			t.Errorf("CheckLabel(%q) = %v, want ok=%v", tc.label, err, tc.ok)
		}
	}
}

func TestParseName(t *testing.T) {
	m, l, c := parseName("hermes-box-20260102-030405-before-upgrade-2.hermesbox")
	want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local).UTC()
	if m != "hermes-box" || l != "before-upgrade-2" || !c.Equal(want) {
		t.Fatalf("got %q %q %v", m, l, c)
	}
	if m, l, _ := parseName("odd.hermesbox"); m != "" || l != "odd" {
		t.Fatalf("got %q %q", m, l)
	}
}

func TestInventoryAndDelete(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	first, err := w.snapshot(t.Context(), "box", "one")
	must(t, err)
	second, err := w.snapshot(t.Context(), "box", "two")
	must(t, err)
	// Not backups: a user's directory and a temp directory.
	must(t, os.MkdirAll(filepath.Join(w.m.backups, "notes"), 0o700))
	must(t, os.MkdirAll(filepath.Join(w.m.backups, tempPrefix+"42"), 0o700))
	for _, deep := range []bool{false, true} {
		entries, err := Inventory(t.Context(), w.m.backups, deep, testSigner.PublicKey())
		must(t, err)
		if len(entries) != 2 {
			t.Fatalf("deep=%v: %d entries, want 2: %+v", deep, len(entries), entries)
		}
		e := entries[0]
		state := map[bool]string{false: StateComplete, true: StateVerified}[deep]
		if e.Path != first || e.Label != "one" || e.Machine != "box" || e.Size <= 0 || e.Verified != state || e.Created.IsZero() {
			t.Errorf("deep=%v: first entry %+v", deep, e)
		}
	}
	// Corrupt the second: deep listing says invalid.
	appendTo(t, filepath.Join(second, FileRootfs), "x")
	entries, err := Inventory(t.Context(), w.m.backups, true, testSigner.PublicKey())
	must(t, err)
	if entries[1].Verified != StateInvalid || !strings.Contains(entries[1].Problem, "checksum") {
		t.Errorf("corrupt entry %+v", entries[1])
	}
}

func TestProjectSources(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module x\n", 0o644)
	write(t, root, "host/main.go", "package main\n", 0o644)
	write(t, root, "host/main_test.go", "package main\n", 0o644)
	write(t, root, "host/testdata/big", "x", 0o644)
	write(t, root, "shared/a/a.go", "package a\n", 0o644)
	write(t, root, "bin/hermes-box", "binary", 0o755)
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "host", "link.go")))
	files, err := ProjectSources(root)
	must(t, err)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "go.mod host/main.go shared/a/a.go" {
		t.Fatalf("sources %q", got)
	}
}

// The sources a portable package carries build both binaries on their
// own (Go's module cache supplies the dependencies, as the network would
// on another host).
func TestProjectSourcesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test copies the project's sources and builds them (make test runs it)")
	}
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	must(t, err)
	root := filepath.Dir(strings.TrimSpace(string(out)))
	files, err := ProjectSources(root)
	must(t, err)
	dst := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		must(t, err)
		p := filepath.Join(dst, filepath.FromSlash(f.Name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, data, f.Mode))
	}
	for _, pkg := range []string{"./host", "./guest-agent"} {
		cmd := exec.CommandContext(t.Context(), "go", "build", "-o", os.DevNull, pkg)
		cmd.Dir = dst
		cmd.Env = append(os.Environ(), "GOFLAGS=-tags=containers_image_openpgp", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s from the carried sources: %v\n%s", pkg, err, b)
		}
	}
}
