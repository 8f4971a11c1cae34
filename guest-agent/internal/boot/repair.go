package boot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// The per-boot repairs of what smolvm's pack does to a root file system:
// its host-side extraction drops every owner (all files become the host
// user's) and every setuid, setgid and sticky bit, and its file transfers
// leave hex-named files at the top of the root. Each repair checks before
// it changes anything, so a second boot is a no-op.

// strayName is the name smolvm's transfers leave behind: 16 hex digits.
var strayName = regexp.MustCompile(`^[0-9a-f]{16}$`)

// strayFiles removes regular files named like smolvm's transfer leftovers
// from the top of the root.
func strayFiles(_ context.Context, o *Options) (string, error) {
	ents, err := os.ReadDir(o.Root)
	if err != nil {
		return "", err
	}
	var gone []string
	for _, e := range ents {
		if !e.Type().IsRegular() || !strayName.MatchString(e.Name()) {
			continue
		}
		if err := os.Remove(o.path(e.Name())); err != nil {
			return "", err
		}
		gone = append(gone, "/"+e.Name())
	}
	if len(gone) == 0 {
		return "", skipped("no stray hex-named files in /")
	}
	return "removed " + strings.Join(gone, ", "), nil
}

// rootPath is a path sudo validates strictly: owned by root:root with
// exactly this mode (0 keeps the mode).
type rootPath struct {
	path string
	mode os.FileMode
	// optional paths may be absent (they differ between Debian and Ubuntu
	// releases).
	optional bool
}

// SudoPaths are sudo's binaries and configuration, as the reference's
// start script lists them.
var SudoPaths = []rootPath{
	{"/usr/bin/sudo", os.ModeSetuid | 0o755, false},
	{"/usr/bin/sudoedit", 0, true},
	{"/usr/sbin/visudo", 0, true},
	{"/etc/sudo.conf", 0, true},
	{"/etc/sudoers", 0o440, false},
	{"/etc/sudoers.d", 0o755, false},
	{"/etc/sudoers.d/README", 0, true},
	{boxlayout.SudoersFile, 0o440, true},
	{"/etc/pam.d/sudo", 0, true},
	{"/etc/pam.d/sudo-i", 0, true},
	{"/usr/bin/sudo.ws", 0, true},
	{"/usr/bin/sudoreplay", 0, true},
	{"/usr/bin/cvtsudoers", 0, true},
	{"/usr/sbin/sudo_logsrvd", 0, true},
	{"/usr/sbin/sudo_sendlog", 0, true},
}

// sudoModes makes sudo's files root's with the modes sudo insists on, and
// /usr/libexec/sudo root's throughout.
func sudoModes(_ context.Context, o *Options) (string, error) {
	if _, err := os.Lstat(o.path(SudoPaths[0].path)); errors.Is(err, fs.ErrNotExist) {
		return "", skipped("sudo is not installed")
	}
	var fixed []string
	for _, rp := range SudoPaths {
		changed, err := ensureOwnerMode(o.path(rp.path), 0, 0, rp.mode)
		if errors.Is(err, fs.ErrNotExist) && rp.optional {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", rp.path, err)
		}
		if changed {
			fixed = append(fixed, rp.path)
		}
	}
	n, err := chownAll(o.path("usr/libexec/sudo"), 0, 0)
	if err != nil {
		return "", err
	}
	if n > 0 {
		fixed = append(fixed, fmt.Sprintf("/usr/libexec/sudo (%d paths)", n))
	}
	if len(fixed) == 0 {
		return "", skipped("sudo's files are root's with their modes")
	}
	return "repaired " + strings.Join(fixed, ", "), nil
}

// ensureOwnerMode sets p's owner and (when mode is not 0) its mode,
// reporting whether anything changed. Symlinks are lchowned only.
func ensureOwnerMode(p string, uid, gid uint32, mode os.FileMode) (bool, error) {
	st, err := lstat(p)
	if err != nil {
		return false, err
	}
	changed := false
	if st.Uid != uid || st.Gid != gid {
		if err := lchownKeepMode(p, st, int(uid), int(gid)); err != nil {
			return false, err
		}
		changed = true
	}
	if mode == 0 || st.Mode&0o170000 == 0o120000 {
		return changed, nil
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	cur := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if cur != mode {
		if err := os.Chmod(p, mode); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// chownAll chowns every path under top (top included) not owned by
// uid:gid and returns how many changed; a missing top is nothing to do.
func chownAll(top string, uid, gid uint32) (int, error) {
	n := 0
	err := filepath.WalkDir(top, func(p string, _ fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == top {
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		st, err := lstat(p)
		if err != nil || st.Uid == uid && st.Gid == gid {
			return err
		}
		n++
		return lchownKeepMode(p, st, int(uid), int(gid))
	})
	return n, err
}

// treeOwner is a tree that belongs to one account.
type treeOwner struct {
	path string
	user string
}

// OwnedTrees are the trees boot gives back to their accounts: the homes
// (boxadmin's holds the relay's authorized_keys, which sshd reads as
// boxadmin), and Hermes' virtualenv to root: Hermes imports it at start, so
// a file the hermes user could put there (a .pth in site-packages) would
// run inside the gate's process; a box provisioned when the venv was
// hermes' gets it back to root here.
var OwnedTrees = []treeOwner{
	{"/home/" + boxlayout.AdminUser, boxlayout.AdminUser},
	{"/home/" + boxlayout.ServiceUser, boxlayout.ServiceUser},
	{boxlayout.HermesVenv, "root"},
}

// homeOwnership gives each owned tree back to its account, wherever any
// path in it is someone else's.
func homeOwnership(_ context.Context, o *Options) (string, error) {
	var fixed []string
	for _, tr := range OwnedTrees {
		if _, err := os.Lstat(o.path(tr.path)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		u, err := passwd.Lookup(o.Root, tr.user)
		if err != nil {
			return "", err
		}
		n, err := chownAll(o.path(tr.path), u.UID, u.GID)
		if err != nil {
			return "", fmt.Errorf("repairing %s: %w", tr.path, err)
		}
		if n > 0 {
			fixed = append(fixed, fmt.Sprintf("%s (%d paths)", tr.path, n))
		}
	}
	if len(fixed) == 0 {
		return "", skipped("homes and the Hermes virtualenv are their owners'")
	}
	return "chowned " + strings.Join(fixed, ", "), nil
}

// sshModes gives boxadmin's .ssh 0700 and authorized_keys 0600, both
// boxadmin's: sshd refuses keys in a directory or file others can write,
// and cannot read a root-owned 0600 file as boxadmin.
func sshModes(_ context.Context, o *Options) (string, error) {
	dir := "/home/" + boxlayout.AdminUser + "/.ssh"
	if _, err := os.Lstat(o.path(dir)); errors.Is(err, fs.ErrNotExist) {
		return "", skipped(dir + " does not exist (no key installed yet)")
	}
	u, err := passwd.Lookup(o.Root, boxlayout.AdminUser)
	if err != nil {
		return "", err
	}
	var fixed []string
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{dir, os.ModeDir | 0o700}, {dir + "/authorized_keys", 0o600}} {
		fi, err := os.Lstat(o.path(p.path))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a plain file or directory (%v)", p.path, fi.Mode().Type())
		}
		changed, err := ensureOwnerMode(o.path(p.path), u.UID, u.GID, p.mode.Perm())
		if err != nil {
			return "", err
		}
		if changed {
			fixed = append(fixed, p.path)
		}
	}
	if len(fixed) == 0 {
		return "", skipped("boxadmin's .ssh and authorized_keys have their modes")
	}
	return "repaired " + strings.Join(fixed, ", "), nil
}

// hermesHomeLink points /home/hermes/.hermes at the workspace's Hermes home.
func hermesHomeLink(_ context.Context, o *Options) (string, error) {
	home := "/home/" + boxlayout.ServiceUser
	if _, err := os.Lstat(o.path(home)); errors.Is(err, fs.ErrNotExist) {
		return "", skipped(home + " does not exist")
	}
	link := o.path(home + "/.hermes")
	if cur, err := os.Readlink(link); err == nil && cur == boxlayout.HermesHome {
		return "", skipped(home + "/.hermes already points at " + boxlayout.HermesHome)
	}
	if err := os.RemoveAll(link); err != nil {
		return "", err
	}
	if err := os.Symlink(boxlayout.HermesHome, link); err != nil {
		return "", err
	}
	u, err := passwd.Lookup(o.Root, boxlayout.ServiceUser)
	if err != nil {
		return "", err
	}
	if err := os.Lchown(link, int(u.UID), int(u.GID)); err != nil {
		return "", err
	}
	return home + "/.hermes -> " + boxlayout.HermesHome, nil
}

// hostsEntry makes the machine's hostname resolve (sudo looks it up).
func hostsEntry(_ context.Context, o *Options) (string, error) {
	name, err := o.Hostname()
	if err != nil || name == "" {
		return "", skipped("no hostname")
	}
	b, err := os.ReadFile(o.path("etc/hosts"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && !strings.HasPrefix(f[0], "#") {
			for _, h := range f[1:] {
				if h == name {
					return "", skipped(name + " is in /etc/hosts")
				}
			}
		}
	}
	if err := writeLike(o.path("etc/hosts"), appendLine(b, "127.0.1.1 "+name), 0o644); err != nil {
		return "", err
	}
	return "added 127.0.1.1 " + name + " to /etc/hosts", nil
}
