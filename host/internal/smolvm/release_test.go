package smolvm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheckExtracted lays out data dirs as 1.0.4 (private pack) and 1.9.x
// on Linux (shared store pointer) leave them, and broken variants.
func TestCheckExtracted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared store exists on Linux only")
	}
	ctx := context.Background()
	base := t.TempDir()
	shared := filepath.Join(base, "vms", "_shared", "0a1b2c3d")
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(shared, ExtractedMarker))
	mk(filepath.Join(shared, "layers", "sha256-x", "f"))
	empty := filepath.Join(base, "vms", "_shared", "00000000")
	mk(filepath.Join(empty, ExtractedMarker))
	cases := []struct {
		name, version string
		layout        func(dir string)
		wantErr       string
	}{
		{"private 1.0.4", "1.0.4", func(d string) { mk(filepath.Join(d, "pack", ExtractedMarker)) }, ""},
		{"private 1.9.3 (shared extract disabled)", "1.9.3", func(d string) { mk(filepath.Join(d, "pack", ExtractedMarker)) }, ""},
		{"evicted 1.0.4", "1.0.4", func(d string) { mk(filepath.Join(d, "pack", "layers", "x")) }, "extraction cache evicted them"},
		{"pointer 1.9.3", "1.9.3", func(d string) { write(t, filepath.Join(d, SharedPackPointer), shared+"\n") }, ""},
		{"pointer ignored on 1.0.4", "1.0.4", func(d string) { write(t, filepath.Join(d, SharedPackPointer), shared+"\n") }, "evicted"},
		{"no pointer 1.9.3", "1.9.3", func(d string) { mk(filepath.Join(d, "pack", "x")) }, "no such file"},
		{"relative pointer", "1.9.3", func(d string) { write(t, filepath.Join(d, SharedPackPointer), "_shared/0a1b2c3d\n") }, "clean absolute path"},
		{"pointer outside _shared", "1.9.3", func(d string) { write(t, filepath.Join(d, SharedPackPointer), base+"\n") }, "outside a _shared"},
		{"pointer to missing dir", "1.9.3", func(d string) {
			write(t, filepath.Join(d, SharedPackPointer), filepath.Join(base, "vms", "_shared", "ffffffff"))
		}, "not a directory"},
		{"no layers", "1.9.3", func(d string) { write(t, filepath.Join(d, SharedPackPointer), empty) }, "has no layers"},
		{"symlink pointer", "1.9.3", func(d string) {
			write(t, filepath.Join(base, "elsewhere"), shared)
			if err := os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(d, SharedPackPointer)); err != nil {
				t.Fatal(err)
			}
		}, "not a small regular file"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(base, "data", string(rune('a'+i)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.layout(dir)
			r := &versioned{version: c.version, recorder: recorder{answers: []Result{{Stdout: []byte(dir + "\n")}}}}
			err := New(r).CheckExtracted(ctx, "box")
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
			if r.argv(0) != "machine data-dir --name box" {
				t.Errorf("argv %q", r.argv(0))
			}
		})
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
