//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
)

// TestRemapTree: every path ends up 501:20 with only its permission bits,
// symlinks are lchowned (their targets untouched), and a stray hex-named
// file appears at the top.
func TestRemapTree(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; this test chowns files")
		}
		t.Skip("chown to other users needs root")
	}
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, nil, 0o600)
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	os.MkdirAll(filepath.Join(root, "tmp"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/bin/sudo"), []byte("x"), 0o755)
	os.Chmod(filepath.Join(root, "usr/bin/sudo"), os.ModeSetuid|0o755)
	os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777)
	os.Symlink(outside, filepath.Join(root, "link"))
	n, err := remapTree(root, 501, 20)
	if err != nil || n != 6 {
		t.Fatalf("remapTree: %d paths, %v; want 6", n, err)
	}
	for p, mode := range map[string]uint32{"usr/bin/sudo": 0o755, "tmp": 0o777, "usr": 0o755, "link": 0o777} {
		var st syscall.Stat_t
		syscall.Lstat(filepath.Join(root, p), &st)
		if st.Uid != 501 || st.Gid != 20 || st.Mode&0o7777 != mode {
			t.Errorf("%s: %d:%d %o, want 501:20 %o", p, st.Uid, st.Gid, st.Mode&0o7777, mode)
		}
	}
	var st syscall.Stat_t
	syscall.Stat(outside, &st)
	if st.Uid != 0 {
		t.Error("the symlink's target was chowned")
	}
	if err := strayFile(root); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(root)
	found := false
	for _, e := range ents {
		found = found || regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(e.Name())
	}
	if !found {
		t.Errorf("no stray file in %v", ents)
	}
	if _, _, err := parseOwner("501"); err == nil {
		t.Error("parseOwner accepted 501")
	}
}
