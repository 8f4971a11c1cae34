package boot

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; this test chowns files")
		}
		t.Skip("chown to other users needs root")
	}
}

func write(t *testing.T, root, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// accounts writes passwd and group with hermes as the test's own user.
func accounts(t *testing.T, root string) {
	t.Helper()
	u, g := os.Getuid(), os.Getgid()
	write(t, root, "etc/passwd", fmt.Sprintf("root:x:0:0::/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/sh\n"+
		"boxadmin:x:%d:%d::/home/boxadmin:/bin/bash\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n", u, g, u, g), 0o644)
	write(t, root, "etc/group", fmt.Sprintf("hermes:x:%d:\nboxadmin:x:%d:\n", g, g), 0o644)
}

// tarball is a seed archive of entries (gzipped when gz), owned by the
// test's user, with mode 0644 where an entry gives none.
func tarball(t *testing.T, gz bool, entries ...tartest.Entry) string {
	t.Helper()
	for i := range entries {
		entries[i].UID, entries[i].GID = os.Getuid(), os.Getgid()
		if entries[i].Mode == 0 {
			entries[i].Mode = 0o644
		}
	}
	b := tartest.Tar(t, entries)
	if gz {
		b = tartest.Gzip(t, b)
	}
	return string(b)
}

func startupLog(t *testing.T, root string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(root, boxlayout.StartupLog))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestPrepareIsIdempotent(t *testing.T) {
	root := t.TempDir()
	accounts(t, root)
	write(t, root, boxlayout.SeedID, "seed-7\n", 0o644)
	write(t, root, boxlayout.SeedArchive, tarball(t, true,
		tartest.Entry{Name: "work/", Type: tar.TypeDir, Mode: 0o750},
		tartest.Entry{Name: "work/bin/run", Type: tar.TypeReg, Body: "#!/bin/sh\n", Mode: 0o755},
		tartest.Entry{Name: "work/link", Type: tar.TypeSymlink, Link: "bin/run"},
		tartest.Entry{Name: "work/hard", Type: tar.TypeLink, Link: "work/bin/run"},
		tartest.Entry{Name: "hermes-home/config.yaml", Type: tar.TypeReg, Body: "a: 1\n"},
	), 0o600)
	if err := Prepare(t.Context(), Options{Root: root, Hostname: fixedHost}); err != nil {
		t.Fatal(err)
	}
	first := startupLog(t, root)
	want := []string{"restore-wait skipped", "stray-files skipped", "ownership-repair skipped", "accounts ok", "sudo-modes skipped",
		"home-ownership skipped", "ssh-modes skipped", "hermes-home-link ok", "hosts ok", "host-keys ok", "tmp-modes ok", "run-dirs ok",
		"workspace-seed ok", "workspace-ownership ok", "codex skipped"}
	if len(first) != len(want) || len(Steps()) != len(want) {
		t.Fatalf("startup log has %d lines for %d steps, want %d:\n%s", len(first), len(Steps()), len(want), strings.Join(first, "\n"))
	}
	for i, w := range want {
		name, outcome, _ := strings.Cut(w, " ")
		if !strings.Contains(first[i], "stage="+name+" "+outcome+":") {
			t.Errorf("line %d: %q, want %s", i, first[i], w)
		}
	}
	for name, mode := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "var/tmp": os.ModeDir | os.ModeSticky | 0o777, "run/sshd": os.ModeDir | 0o755,
		"workspace/work": os.ModeDir | 0o750, "workspace/work/bin/run": 0o755, "workspace/hermes-home/config.yaml": 0o644} {
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode(), err, mode)
		}
	}
	if l, _ := os.Readlink(filepath.Join(root, "workspace/work/link")); l != "bin/run" {
		t.Errorf("symlink -> %q", l)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "workspace/work/hard")); string(b) != "#!/bin/sh\n" {
		t.Errorf("hard link content %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, boxlayout.RestoredID)); string(b) != "seed-7\n" {
		t.Errorf("restored id %q", b)
	}
	keys1, _ := os.ReadFile(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key.pub"))

	// A second boot changes nothing.
	os.WriteFile(filepath.Join(root, "workspace/work/mine"), []byte("user data"), 0o600)
	if err := Prepare(t.Context(), Options{Root: root, Hostname: fixedHost}); err != nil {
		t.Fatal(err)
	}
	second := startupLog(t, root)[len(want):]
	for i, line := range second {
		if !strings.Contains(line, " skipped: ") && !strings.Contains(line, "stage=host-keys ok") && !strings.Contains(line, "stage=tmp-modes ok") && !strings.Contains(line, "stage=run-dirs ok") {
			t.Errorf("second boot, line %d changed something: %q", i, line)
		}
	}
	if !strings.Contains(second[12], "workspace-seed skipped: workspace already seeded from seed-7") {
		t.Errorf("second seed: %q", second[12])
	}
	if keys2, _ := os.ReadFile(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key.pub")); !bytes.Equal(keys1, keys2) {
		t.Error("host key changed on the second boot")
	}
	if _, err := os.Stat(filepath.Join(root, "workspace/work/mine")); err != nil {
		t.Error("user data lost on the second boot")
	}
}

func TestWorkspaceSeedRefusals(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		archive string
		before  func(root string)
		want    string
		failed  bool
	}{
		{"bad id", "../x\n", "", nil, `bad seed id "../x\n"`, true},
		{"two newlines", "s1\n\n", "", nil, "bad seed id", true},
		{"escaping name", "s1\n", "../evil", nil, `entry "../evil": unsafe archive entry`, true},
		{"absolute name", "s1\n", "/evil", nil, `entry "/evil": unsafe archive entry`, true},
		{"through a symlink", "s1\n", "link/evil", nil, "a symlink or non-directory on the way", true},
		{"device node", "s1\n", "dev", nil, "device or fifo", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, boxlayout.SeedID, tt.id, 0o644)
			var entries []tartest.Entry
			switch tt.archive {
			case "link/evil":
				entries = []tartest.Entry{{Name: "link", Type: tar.TypeSymlink, Link: "/tmp"}, {Name: "link/evil", Type: tar.TypeReg, Body: "x"}}
			case "dev":
				entries = []tartest.Entry{{Name: "ok", Type: tar.TypeReg, Body: "x"}, {Name: "dev", Type: tar.TypeChar}}
			case "":
				entries = []tartest.Entry{{Name: "ok", Type: tar.TypeReg, Body: "x"}}
			default:
				entries = []tartest.Entry{{Name: "ok", Type: tar.TypeReg, Body: "x"}, {Name: tt.archive, Type: tar.TypeReg, Body: "x"}}
			}
			write(t, root, boxlayout.SeedArchive, tarball(t, false, entries...), 0o600)
			if tt.before != nil {
				tt.before(root)
			}
			msg, err := workspaceSeed(t.Context(), &Options{Root: root})
			var skip skipped
			if tt.failed {
				if err == nil || errorsAsSkip(err, &skip) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %q, %v; want a failure containing %q", msg, err, tt.want)
				}
				if _, err := os.Stat(filepath.Join(root, boxlayout.RestoredID)); err == nil {
					t.Error("restored id written after a failed seed")
				}
				if ents, _ := os.ReadDir(filepath.Join(root, "workspace")); len(ents) != 0 {
					t.Errorf("workspace changed by a failed seed: %v", ents)
				}
				return
			}
			if !errorsAsSkip(err, &skip) || !strings.Contains(skip.Error(), tt.want) {
				t.Fatalf("got %q, %v; want skipped with %q", msg, err, tt.want)
			}
		})
	}
}

func errorsAsSkip(err error, s *skipped) bool {
	v, ok := err.(skipped)
	if ok {
		*s = v
	}
	return ok
}

func TestRestoreWait(t *testing.T) {
	root := t.TempDir()
	env := func(k string) string { return map[string]string{boxlayout.EnvRestoreMode: "true"}[k] }
	go func() {
		time.Sleep(100 * time.Millisecond)
		write(t, root, boxlayout.RestoreReady, "", 0o600)
	}()
	o := &Options{Root: root, Getenv: env, Poll: 10 * time.Millisecond}
	o.defaults()
	if msg, err := restoreWait(t.Context(), o); err != nil || !strings.Contains(msg, "marker found") {
		t.Fatalf("got %q, %v", msg, err)
	}
	// Without the marker, boot waits until it is stopped, and fails.
	root2 := t.TempDir()
	accounts(t, root2)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := Prepare(ctx, Options{Root: root2, Getenv: env, Poll: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "restore-wait") {
		t.Fatalf("got %v", err)
	}
	if lines := startupLog(t, root2); len(lines) != 1 || !strings.Contains(lines[0], "stage=restore-wait failed") {
		t.Fatalf("startup log %q", lines)
	}
	if _, err := os.Stat(filepath.Join(root2, "etc/ssh")); err == nil {
		t.Fatal("steps after the restore wait ran")
	}
}

func statOwner(t *testing.T, p string) (uint32, uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid, st.Mode & 0o7777
}

func TestOwnershipRepair(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	sudo := write(t, root, OwnershipWitness, "sudo", 0o755)
	etc := write(t, root, "etc/hostname", "box", 0o644)
	other := write(t, root, "home/hermes/file", "x", 0o644)
	ws := write(t, root, "workspace/work/file", "x", 0o644)
	link := filepath.Join(root, "usr/bin/sudoedit")
	os.Symlink("sudo", link)
	for _, p := range []string{sudo, etc, ws, filepath.Dir(sudo), link} {
		os.Lchown(p, 501, 20)
	}
	os.Chown(other, 501, 21) // another gid: not the mapped pair
	syscall.Chmod(sudo, 0o4755)
	msg, err := ownershipRepair(t.Context(), &Options{Root: root})
	if err != nil || !strings.Contains(msg, "chowned 4 paths from 501:20") {
		t.Fatalf("got %q, %v", msg, err)
	}
	tests := []struct {
		path           string
		uid, gid, mode uint32
	}{
		{sudo, 0, 0, 0o4755}, {etc, 0, 0, 0o644}, {filepath.Dir(sudo), 0, 0, 0o755},
		{other, 501, 21, 0o644}, {ws, 501, 20, 0o644},
	}
	for _, tt := range tests {
		if uid, gid, mode := statOwner(t, tt.path); uid != tt.uid || gid != tt.gid || mode != tt.mode {
			t.Errorf("%s: %d:%d %o, want %d:%d %o", tt.path, uid, gid, mode, tt.uid, tt.gid, tt.mode)
		}
	}
	if uid, _, _ := statOwner(t, link); uid != 0 {
		t.Errorf("symlink not chowned itself")
	}
	if _, err := ownershipRepair(t.Context(), &Options{Root: root}); !errorsAsSkip(err, new(skipped)) {
		t.Fatalf("second run: %v, want skipped (marker)", err)
	}
}

func TestWorkspaceOwnershipChownsForeignTrees(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	write(t, root, "etc/passwd", "hermes:x:1002:1002::/home/hermes:/bin/sh\n", 0o644)
	write(t, root, "etc/group", "hermes:x:1002:\n", 0o644)
	f := write(t, root, "workspace/work/a/b", "x", 0o644)
	os.Chown(filepath.Join(root, "workspace/work"), 0, 0)
	msg, err := workspaceOwnership(t.Context(), &Options{Root: root})
	if err != nil || !strings.Contains(msg, "/workspace/work (3 paths)") {
		t.Fatalf("got %q, %v", msg, err)
	}
	if uid, gid, _ := statOwner(t, f); uid != 1002 || gid != 1002 {
		t.Fatalf("file owned by %d:%d", uid, gid)
	}
}

func fixedHost() (string, error) { return "box", nil }

func TestWorkspaceSeedByID(t *testing.T) {
	root := t.TempDir()
	seed := func(id, body string) {
		write(t, root, boxlayout.SeedID, id+"\n", 0o644)
		write(t, root, boxlayout.SeedArchive, tarball(t, true,
			tartest.Entry{Name: "hermes-home/config.yaml", Type: tar.TypeReg, Body: body},
			tartest.Entry{Name: "work/seeded", Type: tar.TypeReg, Body: body},
		), 0o600)
	}
	run := func() (string, error) { return workspaceSeed(t.Context(), &Options{Root: root}) }
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "workspace", name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	seed("s1", "one")
	if msg, err := run(); err != nil || !strings.Contains(msg, "seeded from s1") {
		t.Fatalf("first seed: %q, %v", msg, err)
	}
	write(t, root, "workspace/work/mine", "user data", 0o600)
	write(t, root, "workspace/stale", "from s1's time", 0o600)
	// The same id is a no-op.
	if _, err := run(); !errorsAsSkip(err, new(skipped)) {
		t.Fatalf("same id: %v, want skipped", err)
	}
	if read("stale") != "from s1's time" {
		t.Fatal("the same id changed the workspace")
	}
	// A different id replaces everything but work/.
	seed("s2", "two")
	msg, err := run()
	if err != nil || !strings.Contains(msg, "reseeded from s2, replacing s1") || !strings.Contains(msg, "work/ kept") {
		t.Fatalf("reseed: %q, %v", msg, err)
	}
	for name, want := range map[string]string{"hermes-home/config.yaml": "two", "work/mine": "user data", "work/seeded": "one"} {
		if got := read(name); got != want {
			t.Errorf("%s after the reseed: %q, want %q", name, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "workspace/stale")); err == nil {
		t.Error("a top-level entry outside work/ survived the reseed")
	}
	if b, _ := os.ReadFile(filepath.Join(root, boxlayout.RestoredID)); string(b) != "s2\n" {
		t.Errorf("restored id %q", b)
	}
	// A used workspace that never recorded a seed is seeded, work/ kept.
	os.Remove(filepath.Join(root, boxlayout.RestoredID))
	seed("s3", "three")
	if msg, err := run(); err != nil || !strings.Contains(msg, "work/ kept") || read("work/mine") != "user data" || read("hermes-home/config.yaml") != "three" {
		t.Fatalf("unrecorded workspace: %q, %v", msg, err)
	}
}
