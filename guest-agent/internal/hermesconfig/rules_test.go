package hermesconfig

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// editors are the three ways this package writes a Hermes file; the rule
// set applies to each of them.
var editors = []struct {
	name string
	yaml bool
	edit func(path string) error
}{
	{"seed", true, func(p string) error { _, err := SeedFile(p); return err }},
	{"mcp server", true, func(p string) error { return SetMCPServer(p, "executor", ExecutorServer()) }},
	{"dotenv", false, func(p string) error { return SetEnv(p, ExecutorKeyVar, "exk_1") }},
}

func TestEveryEditorRefusesTheSameInput(t *testing.T) {
	inputs := map[string]string{
		"non-UTF-8":     "a: \xff\xfe\n",
		"two documents": "a: 1\n---\nb: 2\n",
		"list root":     "- a\n",
	}
	for _, ed := range editors {
		for what, in := range inputs {
			if !ed.yaml && what != "non-UTF-8" {
				continue
			}
			t.Run(ed.name+"/"+what, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "f")
				if err := os.WriteFile(path, []byte(in), 0o640); err != nil {
					t.Fatal(err)
				}
				if err := ed.edit(path); err == nil || !strings.Contains(err.Error(), path) {
					t.Fatalf("got %v, want a refusal naming the file", err)
				}
				if got, _ := os.ReadFile(path); string(got) != in {
					t.Fatalf("file changed to %q", got)
				}
			})
		}
	}
}

func TestEveryEditorKeepsOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs the tests as root")
		}
		t.Skip("changing owners needs root")
	}
	for _, ed := range editors {
		t.Run(ed.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chown(dir, 4321, 4321); err != nil {
				t.Fatal(err)
			}
			fresh := filepath.Join(dir, "new")
			if err := ed.edit(fresh); err != nil {
				t.Fatal(err)
			}
			if uid, mode := owner(t, fresh); uid != 4321 || mode != 0o600 {
				t.Errorf("new file: uid %d mode %04o, want the directory's 4321 and 0600", uid, mode)
			}
			kept := filepath.Join(dir, "old")
			if err := os.WriteFile(kept, []byte("# mine\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(kept, 1234, 1234); err != nil {
				t.Fatal(err)
			}
			if err := ed.edit(kept); err != nil {
				t.Fatal(err)
			}
			wantMode := os.FileMode(0o640)
			if !ed.yaml {
				wantMode = 0o600 // secrets are always 0600
			}
			if uid, mode := owner(t, kept); uid != 1234 || mode != wantMode {
				t.Errorf("existing file: uid %d mode %04o, want 1234 and %04o", uid, mode, wantMode)
			}
		})
	}
}

func owner(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()
}
