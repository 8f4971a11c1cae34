package boot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// skipTop are top-level directories the ownership repair never walks:
// virtual file systems, and the workspace, whose ownership has its own step.
var skipTop = map[string]bool{"proc": true, "sys": true, "dev": true, "run": true, "workspace": true}

// ownershipRepair undoes smolvm 1.0.4's packing, which maps root-owned
// files to the host user's uid and gid: if a file that is always root's
// (usr/bin/sudo) is owned by someone else, that uid:gid pair is the host's
// and every path owned by exactly that pair on the root file system goes
// back to root:root (setuid bits kept). It fails if any remain, and runs
// once per packed image (a marker; restore removes it).
func ownershipRepair(_ context.Context, o *Options) (string, error) {
	marker := o.path(boxlayout.OwnershipMarker)
	if _, err := lstat(marker); err == nil {
		return "", skipped("already repaired (" + boxlayout.OwnershipMarker + ")")
	}
	witness, err := lstat(o.path(OwnershipWitness))
	if errors.Is(err, fs.ErrNotExist) {
		return "", skipped(OwnershipWitness + " is missing; nothing to compare with")
	}
	if err != nil {
		return "", err
	}
	msg := "root-owned files are root's"
	if witness.Uid != 0 || witness.Gid != 0 {
		uid, gid := witness.Uid, witness.Gid
		fixed, err := walkOwned(o.Root, uid, gid, func(p string, st *syscall.Stat_t) error { return lchownKeepMode(p, st, 0, 0) })
		if err != nil {
			return "", fmt.Errorf("repairing ownership %d:%d: %w", uid, gid, err)
		}
		left, err := walkOwned(o.Root, uid, gid, func(string, *syscall.Stat_t) error { return nil })
		if err != nil {
			return "", fmt.Errorf("checking ownership %d:%d: %w", uid, gid, err)
		}
		if left > 0 {
			return "", fmt.Errorf("%d paths are still owned by %d:%d after the repair", left, uid, gid)
		}
		msg = fmt.Sprintf("chowned %d paths from %d:%d (smolvm's host mapping) to root:root", fixed, uid, gid)
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(marker, []byte(msg+"\n"), 0o600); err != nil {
		return "", err
	}
	return msg, nil
}

// walkOwned calls fn for every path on root's file system owned by exactly
// uid:gid and returns how many there were.
func walkOwned(root string, uid, gid uint32, fn func(string, *syscall.Stat_t) error) (int, error) {
	top, err := lstat(root)
	if err != nil {
		return 0, err
	}
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		// A path gone since its directory was read was renamed or removed
		// by a process that runs beside boot (the host's hostkeys writes
		// its keys through temporary names): there is nothing to repair.
		if vanished(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && skipTop[rel] {
			return filepath.SkipDir
		}
		st, err := lstat(p)
		if vanished(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() && st.Dev != top.Dev {
			return filepath.SkipDir // another file system (-xdev)
		}
		if st.Uid != uid || st.Gid != gid {
			return nil
		}
		n++
		if err := fn(p, st); !vanished(err) {
			return err
		}
		return nil
	})
	return n, err
}

// vanished reports an error that says the path no longer exists.
func vanished(err error) bool { return errors.Is(err, fs.ErrNotExist) }
