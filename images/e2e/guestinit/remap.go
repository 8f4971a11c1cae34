//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// remapBoot is the pack's remap boot (smolvm.remap=UID:GID on the kernel
// command line): it does to the root what smolvm 1.0.4's host-side
// unpacking does, reports on the console and powers off.
func remapBoot(owner string) {
	uid, gid, err := parseOwner(owner)
	if err == nil {
		var n int
		n, err = remapTree("/", uid, gid)
		if err == nil {
			err = strayFile("/")
		}
		if err == nil {
			console("remap done: %d paths now %d:%d without setuid, setgid and sticky bits", n, uid, gid)
		}
	}
	if err != nil {
		console("remap failed: %v", err)
	}
	powerOff()
}

func parseOwner(s string) (int, int, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("bad smolvm.remap %q: want UID:GID", s)
	}
	return uid, gid, nil
}

// remapTree lchowns every path on root's file system to uid:gid and drops
// the setuid, setgid and sticky bits of every non-symlink, as the tar
// crate's default unpacking by an unprivileged host user leaves them.
func remapTree(root string, uid, gid int) (int, error) {
	var top syscall.Stat_t
	if err := syscall.Lstat(root, &top); err != nil {
		return 0, err
	}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if d.IsDir() && st.Dev != top.Dev {
			return filepath.SkipDir
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		n++
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return syscall.Chmod(p, st.Mode&0o777)
	})
	return n, err
}

// strayFile leaves a file named like smolvm's transfer leftovers at the top
// of root.
func strayFile(root string) error {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, hex.EncodeToString(b)), []byte("smolvm transfer\n"), 0o644)
}
