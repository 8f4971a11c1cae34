package boot

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Smolvm's host user, as a Mac's first account maps through the pack.
const hostUID, hostGID = 501, 20

// boxRoot writes a small box: the accounts, sudo and its configuration,
// boxadmin's key, the homes, Hermes' virtualenv, /tmp, and dpkg's
// statoverride naming messagebus, with their proper owners and modes.
func boxRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, root, "etc/passwd", "root:x:0:0::/root:/bin/bash\nsshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"+
		"boxadmin:x:1001:1001::/home/boxadmin:/bin/bash\nhermes:x:1002:1002::/home/hermes:/bin/bash\n", 0o644)
	write(t, root, "etc/group", "root:x:0:\nshadow:x:42:\nboxadmin:x:1001:\nhermes:x:1002:\n", 0o644)
	write(t, root, "etc/shadow", "root:*:19000:0:99999:7:::\nboxadmin::19000:0:99999:7:::\nhermes:!:19000:0:99999:7:::\n", 0o640)
	write(t, root, "etc/hosts", "127.0.0.1 localhost\n127.0.1.1 box\n", 0o644)
	write(t, root, "usr/bin/sudo", "sudo", 0o755)
	write(t, root, "usr/libexec/sudo/sudoers.so", "so", 0o644)
	write(t, root, "etc/sudoers", "root ALL=(ALL) ALL\n", 0o440)
	write(t, root, "etc/sudoers.d/hermes-box", "hermes ALL=(ALL) NOPASSWD: ALL\n", 0o440)
	write(t, root, "home/boxadmin/.ssh/authorized_keys", "ssh-ed25519 AAAA key\n", 0o600)
	write(t, root, "home/boxadmin/.bash_profile", "exec tmux\n", 0o644)
	write(t, root, "home/hermes/.bashrc", "", 0o644)
	write(t, root, "usr/local/lib/hermes-agent/venv/bin/python", "py", 0o755)
	write(t, root, "workspace/work/note", "x", 0o644)
	os.Chmod(filepath.Join(root, "workspace/work"), 0o750)
	os.Chmod(filepath.Join(root, "workspace"), 0o750)
	write(t, root, "var/lib/dpkg/statoverride", "root messagebus 4754 /usr/lib/dbus-1.0/dbus-daemon-launch-helper\n", 0o644)
	for _, d := range []string{"tmp", "var/tmp", "run"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Chmod(filepath.Join(root, "home/boxadmin/.ssh"), 0o700)
	os.Chmod(filepath.Join(root, "usr/bin/sudo"), os.ModeSetuid|0o755)
	os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777)
	os.Chown(filepath.Join(root, "etc/shadow"), 0, 42)
	for tree, id := range map[string]int{"home/boxadmin": 1001, "home/hermes": 1002, "usr/local/lib/hermes-agent/venv": 0, "workspace": 1002} {
		chownTree(filepath.Join(root, tree), uint32(id), uint32(id))
	}
	return root
}

// remap does to a root what smolvm 1.0.4's pack does: its host-side
// extraction (the tar crate without preserve-ownership or -permissions)
// leaves every path owned by the host user and drops setuid, setgid and
// sticky bits; a file transfer leaves a hex-named file at the top.
func remap(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, hostUID, hostGID); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, root, "0123456789abcdef", "smolvm transfer", 0o644)
}

type ownerMode struct {
	path     string
	uid, gid uint32
	mode     uint32
}

var repaired = []ownerMode{
	{"usr/bin/sudo", 0, 0, 0o4755},
	{"usr/libexec/sudo/sudoers.so", 0, 0, 0o644},
	{"etc/sudoers", 0, 0, 0o440},
	{"etc/sudoers.d/hermes-box", 0, 0, 0o440},
	{"home/boxadmin/.ssh", 1001, 1001, 0o700},
	{"home/boxadmin/.ssh/authorized_keys", 1001, 1001, 0o600},
	{"home/boxadmin/.bash_profile", 1001, 1001, 0o644},
	{"home/hermes/.bashrc", 1002, 1002, 0o644},
	{"usr/local/lib/hermes-agent/venv/bin/python", 0, 0, 0o755},
	{"tmp", 0, 0, 0o1777},
	{"var/tmp", 0, 0, 0o1777},
	{"etc/passwd", 0, 0, 0o644},
	{"workspace", 1002, 1002, 0o750},
	{"workspace/work", 1002, 1002, 0o750},
}

// TestPrepareRepairsARemappedTree: a box root remapped as smolvm's pack
// remaps it comes back with every owner and mode sudo and sshd check, and
// nothing left of the host's pair; a second boot changes nothing.
func TestPrepareRepairsARemappedTree(t *testing.T) {
	needRoot(t)
	root := boxRoot(t)
	remap(t, root)
	o := Options{Root: root, Hostname: fixedHost}
	if err := Prepare(t.Context(), o); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(startupLog(t, root), "\n"))
	}
	for _, w := range repaired {
		if uid, gid, mode := statOwner(t, filepath.Join(root, w.path)); uid != w.uid || gid != w.gid || mode != w.mode {
			t.Errorf("%s: %d:%d %o, want %d:%d %o", w.path, uid, gid, mode, w.uid, w.gid, w.mode)
		}
	}
	if n, _ := walkOwned(root, hostUID, hostGID, func(string, *syscall.Stat_t) error { return nil }); n != 0 {
		t.Errorf("%d paths still owned by the host's %d:%d", n, hostUID, hostGID)
	}
	if _, err := os.Lstat(filepath.Join(root, "0123456789abcdef")); err == nil {
		t.Error("the stray hex-named file survived")
	}
	if g, _ := os.ReadFile(filepath.Join(root, "etc/group")); !strings.Contains(string(g), "\nmessagebus:x:") {
		t.Errorf("no messagebus group:\n%s", g)
	}
	first := len(startupLog(t, root))
	if err := Prepare(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	for _, line := range startupLog(t, root)[first:] {
		if strings.Contains(line, " ok: ") && !strings.Contains(line, "stage=host-keys") && !strings.Contains(line, "stage=tmp-modes") && !strings.Contains(line, "stage=run-dirs") {
			t.Errorf("the second boot changed something: %s", line)
		}
	}
}

// TestRepairSteps gives each repair row of boot's table one breakage on an
// otherwise sound box: the step fixes it, and a second run is skipped.
func TestRepairSteps(t *testing.T) {
	needRoot(t)
	tests := []struct {
		step   string
		break_ func(root string)
		check  func(t *testing.T, root string)
	}{
		{"stray-files", func(root string) {
			write(t, root, "fedcba9876543210", "x", 0o644)
			write(t, root, "keepme0123456789", "x", 0o644)
		},
			func(t *testing.T, root string) {
				mustGone(t, root, "fedcba9876543210")
				mustOwnerMode(t, root, ownerMode{"keepme0123456789", 0, 0, 0o644})
			}},
		{"accounts", func(root string) {
			write(t, root, "etc/passwd", "root:x:0:0::/root:/bin/bash\n", 0o644)
			write(t, root, "etc/shadow", "root:*:19000:0:99999:7:::\nboxadmin:$6$x:19000:0:99999:7:::\nhermes:$6$y:19000:0:99999:7:::\n", 0o640)
			os.Chown(filepath.Join(root, "etc/shadow"), 0, 42)
			os.RemoveAll(filepath.Join(root, "home/hermes"))
		}, func(t *testing.T, root string) {
			pw, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
			for _, want := range []string{"boxadmin:x:1001:1001::/home/boxadmin:/bin/bash", "hermes:x:1002:1002::/home/hermes:/bin/bash", "sshd:x:"} {
				if !strings.Contains(string(pw), want) {
					t.Errorf("passwd lacks %q:\n%s", want, pw)
				}
			}
			sh, _ := os.ReadFile(filepath.Join(root, "etc/shadow"))
			if !strings.Contains(string(sh), "\nboxadmin::") || !strings.Contains(string(sh), "\nhermes:!$6$y:") {
				t.Errorf("password states:\n%s", sh)
			}
			mustOwnerMode(t, root, ownerMode{"etc/shadow", 0, 42, 0o640})
			mustOwnerMode(t, root, ownerMode{"home/hermes", 1002, 1002, 0o750})
		}},
		{"sudo-modes", func(root string) {
			os.Chmod(filepath.Join(root, "usr/bin/sudo"), 0o755)
			os.Chown(filepath.Join(root, "etc/sudoers"), hostUID, hostGID)
			os.Chmod(filepath.Join(root, "etc/sudoers.d/hermes-box"), 0o644)
			os.Chown(filepath.Join(root, "usr/libexec/sudo/sudoers.so"), hostUID, hostGID)
		}, func(t *testing.T, root string) { mustOwnerMode(t, root, repaired[:4]...) }},
		{"home-ownership", func(root string) {
			os.Chown(filepath.Join(root, "home/hermes/.bashrc"), 0, 0)
			os.Lchown(filepath.Join(root, "home/boxadmin/.bash_profile"), hostUID, hostGID)
			os.Chown(filepath.Join(root, "usr/local/lib/hermes-agent/venv/bin/python"), 1002, 1002)
		}, func(t *testing.T, root string) { mustOwnerMode(t, root, repaired[6:9]...) }},
		{"ssh-modes", func(root string) {
			os.Chown(filepath.Join(root, "home/boxadmin/.ssh/authorized_keys"), 0, 0)
			os.Chmod(filepath.Join(root, "home/boxadmin/.ssh"), 0o775)
		}, func(t *testing.T, root string) { mustOwnerMode(t, root, repaired[4:6]...) }},
		{"hermes-home-link", func(root string) { write(t, root, "home/hermes/.hermes", "stale", 0o644) },
			func(t *testing.T, root string) {
				if l, err := os.Readlink(filepath.Join(root, "home/hermes/.hermes")); err != nil || l != boxlayout.HermesHome {
					t.Errorf(".hermes -> %q, %v", l, err)
				}
			}},
		{"hosts", func(root string) { write(t, root, "etc/hosts", "127.0.0.1 localhost\n", 0o644) },
			func(t *testing.T, root string) {
				if b, _ := os.ReadFile(filepath.Join(root, "etc/hosts")); string(b) != "127.0.0.1 localhost\n127.0.1.1 box\n" {
					t.Errorf("hosts:\n%s", b)
				}
			}},
		{"tmp-modes", func(root string) {
			os.Chmod(filepath.Join(root, "tmp"), 0o755)
			os.Chown(filepath.Join(root, "var/tmp"), hostUID, hostGID)
		},
			func(t *testing.T, root string) { mustOwnerMode(t, root, repaired[9:11]...) }},
	}
	steps := map[string]Step{}
	for _, s := range Steps() {
		steps[s.Name] = s
	}
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			root := boxRoot(t)
			tt.break_(root)
			s, ok := steps[tt.step]
			if !ok {
				t.Fatalf("no step %q in boot's table", tt.step)
			}
			o := &Options{Root: root, Hostname: fixedHost}
			o.defaults()
			msg, err := s.Run(t.Context(), o)
			if err != nil {
				t.Fatalf("%s: %v", tt.step, err)
			}
			tt.check(t, root)
			if tt.step == "tmp-modes" {
				return // always reports what it enforces
			}
			if again, err := s.Run(t.Context(), o); !errorsAsSkip(err, new(skipped)) {
				t.Errorf("second run after %q: %q, %v; want skipped", msg, again, err)
			}
		})
	}
}

func mustGone(t *testing.T, root, name string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
		t.Errorf("%s still exists", name)
	}
}

func mustOwnerMode(t *testing.T, root string, ws ...ownerMode) {
	t.Helper()
	for _, w := range ws {
		if uid, gid, mode := statOwner(t, filepath.Join(root, w.path)); uid != w.uid || gid != w.gid || mode != w.mode {
			t.Errorf("%s: %d:%d %o, want %d:%d %o", w.path, uid, gid, mode, w.uid, w.gid, w.mode)
		}
	}
}

// TestWalkOwnedSkipsVanishedPaths: a path renamed or removed between its
// directory's read and its visit (the host's hostkeys writing its keys
// through temporary names while boot repairs ownership) is skipped, not
// an error that fails the boot.
func TestWalkOwnedSkipsVanishedPaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "ssh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "key.pub.tmp-1", "key.tmp-2", "z"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	n, err := walkOwned(root, uid, gid, func(p string, _ *syscall.Stat_t) error {
		if filepath.Base(p) == "a" {
			for _, gone := range []string{"key.pub.tmp-1", "key.tmp-2"} {
				if err := os.Remove(filepath.Join(dir, gone)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walkOwned failed on paths that went away during the walk: %v", err)
	}
	// root, etc, etc/ssh, a, z (the two temporary files were gone).
	if n != 5 {
		t.Fatalf("visited %d owned paths, want 5", n)
	}
}
