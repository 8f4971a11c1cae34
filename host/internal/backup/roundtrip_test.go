package backup

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB3Xo0hK1pZ2h1bWJ0ZXN0a2V5Zm9ydGVzdHM= test@hermes-box\n"

func asRoot() bool { return os.Geteuid() == 0 }

func write(t *testing.T, root, rel, data string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, uint32(mode)); err != nil { // raw bits: 0o4755 is set-uid
		t.Fatal(err)
	}
}

func must2(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// makeBase writes the minimal root a new machine starts from.
func makeBase(t *testing.T, root, flavour string) {
	t.Helper()
	write(t, root, "etc/passwd", "root:x:0:0:root:/root:/bin/bash\nboxadmin:x:1000:1000::/home/boxadmin:/bin/bash\n", 0o644)
	write(t, root, "etc/os-release", "NAME="+flavour+"\n", 0o644)
	write(t, root, "usr/local/sbin/hermes-box-agent", "agent of "+flavour, 0o755)
	must(t, os.MkdirAll(filepath.Join(root, "proc"), 0o555))
	must(t, os.MkdirAll(filepath.Join(root, "workspace"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "home/boxadmin"), 0o750))
}

// makeFixture writes a box root with every kind of entry a snapshot must
// keep, plus the ones it must leave out.
func makeFixture(t *testing.T, root, flavour string) {
	t.Helper()
	makeBase(t, root, flavour)
	write(t, root, "etc/hostname", flavour+"\n", 0o644)
	write(t, root, "etc/shadow", "root:*:1::::::\n", 0o640)
	write(t, root, "usr/bin/tool", "#!/bin/sh\necho "+flavour+"\n", 0o755)
	write(t, root, "usr/bin/setuid-tool", "suid", 0o4755)
	write(t, root, "var/spool/sticky/x", "", 0o600)
	must(t, unix.Chmod(filepath.Join(root, "var/spool/sticky"), 0o1777))
	must(t, os.MkdirAll(filepath.Join(root, "var/empty"), 0o700))
	must(t, os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool-hardlink")))
	must(t, os.Symlink("tool", filepath.Join(root, "usr/bin/tool-symlink")))
	must(t, os.Symlink("/etc/hostname", filepath.Join(root, "usr/abs-symlink")))
	must(t, os.Symlink("../nowhere", filepath.Join(root, "usr/dangling")))
	must(t, unix.Mkfifo(filepath.Join(root, "var/fifo"), 0o620))
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big[:1<<20])
	write(t, root, "opt/big.bin", string(big), 0o644)
	write(t, root, "opt/"+strings.Repeat("long-name-", 12)+"/file", "long path", 0o644)
	if err := unix.Lsetxattr(filepath.Join(root, "etc/hostname"), "user.hermes", []byte(flavour), 0); err != nil {
		t.Logf("no user xattrs here: %v", err)
	}
	if asRoot() {
		must(t, os.Lchown(filepath.Join(root, "etc/shadow"), 0, 42))
		must(t, os.Lchown(filepath.Join(root, "home/boxadmin"), 1000, 1000))
		write(t, root, "home/boxadmin/notes", "mine", 0o600)
		must(t, os.Lchown(filepath.Join(root, "home/boxadmin/notes"), 1000, 1000))
		must(t, os.Lchown(filepath.Join(root, "usr/bin/tool-symlink"), 1000, 1000))
		must(t, unix.Mknod(filepath.Join(root, "var/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, os.Lchown(filepath.Join(root, "usr/bin/setuid-tool"), 0, 0))
		must(t, unix.Chmod(filepath.Join(root, "usr/bin/setuid-tool"), 0o4755))
	}
	// Left out of the root part:
	write(t, root, "proc/cpuinfo", "x", 0o444)
	write(t, root, "tmp/scratch", "x", 0o644)
	write(t, root, "run/pid", "1", 0o644)
	write(t, root, "var/lib/hermes-box/restore-ready", "", 0o644)
	// The workspace, with its own exclusions.
	write(t, root, "workspace/hermes-home/config.yaml", "model: "+flavour+"\n", 0o600)
	write(t, root, "workspace/codex-home/config.toml", "x = 1\n", 0o600)
	write(t, root, "workspace/codex-home/auth.json", "{}", 0o600)
	write(t, root, "workspace/codex-home/tmp/junk", "junk", 0o600)
	write(t, root, "workspace/.hermes-box-runtime/image", "repullable", 0o644)
	write(t, root, "workspace/work/project/README", flavour, 0o644)
	must(t, os.Symlink("project/README", filepath.Join(root, "workspace/work/readme-link")))
	// Timestamps that differ from "now", so a lost mtime shows.
	old := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(root, "usr/bin/tool"), old, old))
	must(t, os.Chtimes(filepath.Join(root, "workspace/work/project/README"), old, old))
}

// rootSkip leaves out what the root part does not carry, and what apply
// rewrites on purpose.
func rootSkip(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "workspace", "proc", "sys", "dev", "run", "tmp", "storage", "packed_layers":
		return true
	}
	return rel == "var/lib/hermes-box" || strings.HasPrefix(rel, "var/lib/hermes-box/") ||
		rel == "home/boxadmin/.ssh" || strings.HasPrefix(rel, "home/boxadmin/.ssh/") ||
		rel == "usr/local/sbin/hermes-box-agent"
}

func workspaceSkip(rel string) bool {
	return rel == ".hermes-box-runtime" || rel == "codex-home/tmp"
}

// world is a host with machines, backups and state directories.
type world struct {
	m     *dirMachines
	state string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	w := &world{state: filepath.Join(base, "state"), m: &dirMachines{
		base: filepath.Join(base, "machines"), template: filepath.Join(base, "image"), bin: agentBinary(t),
		backups: filepath.Join(base, "backups"), key: testKey, signer: testSigner,
	}}
	must(t, os.MkdirAll(w.m.base, 0o700))
	makeBase(t, w.m.template, "base-image")
	write(t, w.m.template, "stale/only-in-image", "remove me", 0o644)
	write(t, w.m.template, "proc/keep", "kernel's", 0o644)
	write(t, w.m.template, "workspace/old-file", "replaced", 0o644)
	return w
}

// addMachine creates machine name from the fixture flavour.
func (w *world) addMachine(t *testing.T, name, flavour string) {
	t.Helper()
	dir := w.m.dir(name)
	makeFixture(t, filepath.Join(dir, "root"), flavour)
	must(t, w.m.setState(name, "state", "running"))
	must(t, w.m.setState(name, "services", "running"))
}

func (w *world) snapshot(ctx context.Context, name, label string) (string, error) {
	s := &Snapshot{Ops: w.m, BackupsDir: w.m.backups,
		Meta: Meta{Machine: name, Label: label, Smolvm: "1.0.4", GOOS: "linux", Signer: testSigner, Now: time.Now()}}
	return s.Run(ctx)
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	src := w.m.root("box")

	dir, err := w.snapshot(ctx, "box", "round trip")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dir, "-round-trip"+Suffix) {
		t.Errorf("backup dir %s", dir)
	}
	checkBackupModes(t, dir)
	// Plain gzip that GNU tar reads, listing the same entries.
	gnuList := gnu(t, dir, nil, "tar", "-tzf", FileRootfs)
	if sorted := gnu(t, dir, gnuList, "sort"); string(sorted) != string(must2(os.ReadFile(filepath.Join(dir, FileListing)))) {
		t.Errorf("GNU tar lists rootfs.tar.gz differently from %s", FileListing)
	}
	if w.m.state("box", "services") != "running" || w.m.state("box", "state") != "running" {
		t.Errorf("machine not returned to running: %s/%s", w.m.state("box", "state"), w.m.state("box", "services"))
	}
	if _, err := Verify(ctx, dir, testTrust); err != nil {
		t.Fatal(err)
	}
	staged, err := Stage(ctx, dir, w.state, testTrust, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Remove()

	must(t, w.m.CreateRestore(ctx, "copy", 2222))
	if err := w.m.Apply(ctx, "copy", 2222, staged.Dir); err != nil {
		t.Fatal(err)
	}
	dst := w.m.root("copy")
	diffTrees(t, treeOf(t, src, rootSkip), treeOf(t, dst, rootSkip))
	diffTrees(t, treeOf(t, filepath.Join(src, "workspace"), workspaceSkip), treeOf(t, filepath.Join(dst, "workspace"), nil))

	for _, gone := range []string{"stale", "workspace/old-file", "workspace/codex-home/tmp", "workspace/.hermes-box-runtime"} {
		if _, err := os.Lstat(filepath.Join(dst, gone)); !os.IsNotExist(err) {
			t.Errorf("%s survived the restore (%v)", gone, err)
		}
	}
	for rel, want := range map[string]string{
		"proc/keep":                          "kernel's",
		"usr/local/sbin/hermes-box-agent":    "agent of base-image",
		"home/boxadmin/.ssh/authorized_keys": testKey,
		"var/lib/hermes-box/restore-ready":   "",
		"workspace/hermes-home/config.yaml":  "model: alpha\n",
		"workspace/work/project/README":      "alpha",
		"workspace/codex-home/config.toml":   "x = 1\n",
		"etc/os-release":                     "NAME=alpha\n",
	} {
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q (%v), want %q", rel, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "home/boxadmin/.ssh/authorized_keys")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("authorized_keys mode %v (%v)", fi.Mode(), err)
	}
}

// checkBackupModes checks the 0700 directory of six 0600 files.
func checkBackupModes(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("backup dir mode %v (%v)", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 7 {
		t.Errorf("backup holds %d files, want 7 (the six and the signature)", len(entries))
	}
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileWarnings)); len(b) != 0 {
		t.Errorf("warnings file not empty")
	}
}
