package backup

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gnu runs a reference tool, failing (in CI) or skipping when it is absent.
func gnu(t *testing.T, dir string, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LC_ALL=C")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s %v: %v: %s", name, args, err, stderr.String())
	}
	return out
}

// referenceBackup writes a backup the way the reference implementation
// does: GNU tar with its exclusions, a sorted listing, sha256sum.
func referenceBackup(t *testing.T, root, dir, manifest string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o700))
	gnu(t, dir, nil, "tar", "--one-file-system", "--ignore-failed-read", "--numeric-owner", "-C", root, "-czpf", "rootfs.tar.gz",
		"--exclude=./workspace", "--exclude=./proc", "--exclude=./sys", "--exclude=./dev", "--exclude=./run",
		"--exclude=./storage", "--exclude=./packed_layers", "--exclude=./tmp", "--exclude=./var/lib/hermes-box/restore-ready", ".")
	gnu(t, dir, nil, "tar", "--ignore-failed-read", "--numeric-owner", "-C", filepath.Join(root, "workspace"), "-czpf", "workspace.tar.gz",
		"--exclude=./.hermes-box-runtime", "--exclude=./codex-home/tmp", "--exclude=.hermes-box-rootfs.tar.gz", ".")
	names := gnu(t, dir, nil, "tar", "-tzf", "rootfs.tar.gz")
	must(t, os.WriteFile(filepath.Join(dir, FileListing), gnu(t, dir, names, "sort"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, FileWarnings), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, FileManifest), []byte(manifest), 0o600))
	sums := gnu(t, dir, nil, "sha256sum", Files...)
	must(t, os.WriteFile(filepath.Join(dir, FileSums), sums, 0o600))
}

func TestReferenceFormatVerifiesAndRestores(t *testing.T) {
	tests := []struct{ name, manifest string }{
		{"current", "format=hermes-box-v2\ncreated=2026-06-22T10:00:00Z\nmachine=hermes-box\nsmolvm=smolvm 1.0.4\ngoos=darwin\nssh_key_fingerprint=SHA256:abc\n"},
		{"legacy", "format=hermes-box-v2\ncreated=2026-01-02T03:04:05Z\nmachine=hermes-box\nsmolvm=unknown\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			src := filepath.Join(t.TempDir(), "root")
			makeFixture(t, src, "reference")
			dir := filepath.Join(w.m.backups, "hermes-box-20260622-100000-manual"+Suffix)
			referenceBackup(t, src, dir, tt.manifest)
			v, err := Verify(t.Context(), dir, Trust{LegacyOK: true})
			if err != nil {
				t.Fatal(err)
			}
			if v.Manifest.Legacy() != (tt.name == "legacy") {
				t.Errorf("legacy = %v", v.Manifest.Legacy())
			}
			s, err := Stage(t.Context(), dir, w.state, Trust{LegacyOK: true}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Remove()
			r := &Restore{Ops: w.m, Machine: "box", Port: 2222, StateDir: w.state, Log: slog.New(slog.DiscardHandler)}
			if err := r.Run(t.Context(), s.Dir); err != nil {
				t.Fatal(err)
			}
			// The reference runs tar without --xattrs: its archives carry none.
			diffTrees(t, noXattrs(treeOf(t, src, rootSkip)), treeOf(t, w.m.root("box"), rootSkip))
			diffTrees(t, treeOf(t, filepath.Join(src, "workspace"), workspaceSkip), treeOf(t, filepath.Join(w.m.root("box"), "workspace"), nil))
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	good, err := w.snapshot(t.Context(), "box", "good")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(dir string)
		want   string
	}{
		{"changed archive", func(d string) { appendTo(t, filepath.Join(d, FileRootfs), "x") }, "checksum mismatch"},
		{"listing edited", func(d string) { rewrite(t, d, FileListing, func(s string) string { return s + "./extra\n" }) }, "does not match"},
		{"warnings", func(d string) { rewrite(t, d, FileWarnings, func(string) string { return "tar: file changed\n" }) }, "not empty"},
		{"bad format", func(d string) {
			rewrite(t, d, FileManifest, func(s string) string { return strings.Replace(s, Format, "hermes-box-v1", 1) })
		}, "format"},
		{"symlinked file", func(d string) {
			must(t, os.Rename(filepath.Join(d, FileWarnings), filepath.Join(d, "w")))
			must(t, os.Symlink("w", filepath.Join(d, FileWarnings)))
		}, "symbolic link"},
		{"sums missing a file", func(d string) {
			rewrite(t, d, FileSums, func(s string) string { return s[strings.Index(s, "\n")+1:] })
		}, "missing rootfs.tar.gz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b"+Suffix)
			gnu(t, "/", nil, "cp", "-a", good, dir)
			tt.mutate(dir)
			_, err := Verify(t.Context(), dir, testTrust)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify: %v, want an error containing %q", err, tt.want)
			}
			if _, err := Stage(t.Context(), dir, w.state, testTrust, Limits{}); err == nil {
				t.Fatal("Stage accepted it")
			}
			if left, _ := filepath.Glob(filepath.Join(w.state, stagePrefix+"*")); len(left) != 0 {
				t.Errorf("failed stage left %v", left)
			}
		})
	}
}

func noXattrs(tree map[string]entry) map[string]entry {
	for k, e := range tree {
		e.Xattrs = ""
		tree[k] = e
	}
	return tree
}

func appendTo(t *testing.T, p, s string) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(s)
	must(t, err)
	must(t, f.Close())
}

// rewrite edits a file and fixes its checksum, so only the later checks
// can catch the edit.
func rewrite(t *testing.T, dir, name string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	must(t, err)
	must(t, os.WriteFile(p, []byte(edit(string(b))), 0o600))
	if name != FileSums {
		sums, err := readSums(dir)
		must(t, err)
		sum, _, err := hashFile(t.Context(), p)
		must(t, err)
		sums[name] = sum
		must(t, os.WriteFile(filepath.Join(dir, FileSums), sums.Bytes(), 0o600))
	}
	resign(t, dir)
}

// resign signs dir's SHA256SUMS again with the test key, as the one who
// holds it could.
func resign(t *testing.T, dir string) {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(dir, FileSums))
	must(t, err)
	sig, err := SignSums(testSigner, sums)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, FileSignature), sig, 0o600))
}
