package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

func TestExtractRejectsUnsafeEntries(t *testing.T) {
	file := func(name string) tartest.Entry { return tartest.File(name, "evil") }
	tests := []struct {
		name    string
		entries []tartest.Entry
	}{
		{"dot-dot", []tartest.Entry{file("../evil")}},
		{"absolute", []tartest.Entry{file("/evil")}},
		{"inner dot-dot", []tartest.Entry{file("./a/../../evil")}},
		{"through symlink", []tartest.Entry{tartest.Symlink("./lnk", "../outside"), file("./lnk/evil")}},
		{"through absolute symlink", []tartest.Entry{tartest.Symlink("./lnk", "/"), file("./lnk/evil")}},
		{"hard link outside", []tartest.Entry{tartest.Hardlink("./hl", "../outside/target")}},
		{"hard link to an existing file", []tartest.Entry{tartest.Hardlink("./hl", "./preexisting")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dest, outside := filepath.Join(base, "dest"), filepath.Join(base, "outside")
			for _, d := range []string{dest, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "target"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dest, "preexisting"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := extract(t.Context(), bytes.NewReader(tartest.TarGz(t, tt.entries)), dest, extractOptions{})
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Fatalf("extract: %v, want ErrUnsafeEntry", err)
			}
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(outside, "evil"), "/evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

func TestPartSpec(t *testing.T) {
	if _, err := PartSpec("/", "etc"); err == nil {
		t.Fatal("unknown part accepted")
	}
	s, err := PartSpec("/r", boxlayout.PartWorkspace)
	if err != nil || s.Dir != "/r/workspace" {
		t.Fatalf("%+v %v", s, err)
	}
}
