package provision

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
)

func TestExtractRefusesEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries []tartest.Entry
		want    string
	}{
		{"dot-dot", []tartest.Entry{{Name: "a/../../evil", Body: "x", Mode: 0o644}}, `".." component`},
		{"absolute", []tartest.Entry{{Name: "/etc/evil", Body: "x", Mode: 0o644}}, "absolute path"},
		{"absolute link", []tartest.Entry{tartest.Symlink("a/link", "/etc/passwd")}, "points outside"},
		{"relative link out", []tartest.Entry{tartest.Symlink("a/link", "../../x")}, "points outside"},
		{"write through a link", []tartest.Entry{tartest.Symlink("top/l", "."), tartest.Symlink("top/up", ".."), tartest.Symlink("top/up/up2", "..")}, "symlink or non-directory on the way"},
		{"link through a link to the top", []tartest.Entry{tartest.Symlink("y", "."), tartest.Symlink("x", "y/../esc")}, "points outside"},
		{"link through a link replaced later", []tartest.Entry{{Name: "y/", Type: tar.TypeDir}, tartest.Symlink("x", "y/../z"), {Name: "y", Type: tar.TypeSymlink, Link: "."}}, "points outside"},
		{"links that stay inside", []tartest.Entry{{Name: "top/", Type: tar.TypeDir}, tartest.Symlink("top/l", "."), tartest.Symlink("top/x/y", "../l")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := f.provisioner(f.config())
			dest := t.TempDir()
			archive := filepath.Join(t.TempDir(), "a.tar.gz")
			if err := os.WriteFile(archive, tartest.TarGz(t, tt.entries), 0o600); err != nil {
				t.Fatal(err)
			}
			err := p.extractTarGz(archive, dest, extractOpts{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if exists(filepath.Join(filepath.Dir(dest), "evil")) {
				t.Fatal("an entry escaped")
			}
		})
	}
}

func TestExtractStripsAndNormalizes(t *testing.T) {
	f := newFixture(t)
	p := f.provisioner(f.config())
	dest := t.TempDir()
	archive := filepath.Join(t.TempDir(), "a.tar.gz")
	data := tartest.TarGz(t, []tartest.Entry{
		{Name: "./top/", Type: tar.TypeDir, Mode: 0o700},
		{Name: "./top/bin/tool", Body: "#!/bin/sh\n", Mode: 0o700},
		{Name: "./top/share/doc", Body: "doc", Mode: 0o600},
		tartest.Symlink("./top/bin/alias", "tool"),
	})
	if err := os.WriteFile(archive, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.extractTarGz(archive, dest, extractOpts{strip: 1}); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{"bin/tool": 0o755, "share/doc": 0o644, "bin": 0o755} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want %04o", path, fi.Mode(), err, mode)
		}
	}
	if l, _ := os.Readlink(filepath.Join(dest, "bin/alias")); l != "tool" {
		t.Errorf("link %q", l)
	}
	big := filepath.Join(t.TempDir(), "big.tar.gz")
	if err := os.WriteFile(big, tartest.TarGz(t, []tartest.Entry{{Name: "a", Body: strings.Repeat("x", 100), Mode: 0o644}}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.extractTarGz(big, t.TempDir(), extractOpts{maxBytes: 10}); err == nil || !strings.Contains(err.Error(), "beyond 10 bytes") {
		t.Fatalf("size bound: %v", err)
	}
}
