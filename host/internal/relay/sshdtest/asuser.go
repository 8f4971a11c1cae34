//go:build !hbxrelease

package sshdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// UserDir is a new directory, removed when tb ends, that uid 65534 can
// read (mode 0755): for the files of a test that RerunAsUser runs as that
// user (t.TempDir is the owner's alone).
func UserDir(tb testing.TB, pattern string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// RerunAsUser runs the test binary's test run (an anchored -test.run
// pattern naming one test) again as uid 65534 under setpriv (util-linux),
// from a copy in a UserDir, with HOME and TMPDIR a directory that user can
// write and env added, and fails tb with its output unless it passes.
// Without setpriv the test is skipped (failed under CI=true).
func RerunAsUser(tb testing.TB, run string, env ...string) {
	tb.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("setpriv (util-linux) not found")
		}
		tb.Skip("setpriv (util-linux) not found")
	}
	dir := UserDir(tb, "as-user-")
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		tb.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil || os.Chmod(home, 0o777) != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run", run, "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), "TMPDIR="+home, "HOME="+home), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+strings.Trim(run, "^$")) {
		tb.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	tb.Logf("as uid 65534:\n%s", out)
}
