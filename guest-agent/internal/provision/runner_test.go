package provision

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
)

func TestExecRunner(t *testing.T) {
	sh := lookPath(t, "sh")
	script, err := filepath.Abs("testdata/runner.sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		mode       string
		timeout    time.Duration
		wantOut    string
		wantStatus int
		wantTail   string
		timedOut   bool
	}{
		{"output", "output", time.Minute, "out\n", 0, "", false},
		{"exit status and stderr tail", "fail", time.Minute, "", 7, "line1999", false},
		{"timeout kills the process group", "hang", 200 * time.Millisecond, "", -1, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			// KillAfter is long: returning well before it proves SIGTERM
			// reached the whole group, grandchild included.
			out, err := ExecRunner{KillAfter: 8 * time.Second}.Run(t.Context(), Command{Path: sh, Args: []string{script, tt.mode}, Timeout: tt.timeout})
			if time.Since(start) > 4*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			if string(out.Stdout) != tt.wantOut {
				t.Errorf("stdout %q, want %q", out.Stdout, tt.wantOut)
			}
			if tt.wantStatus == 0 && !tt.timedOut {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a CommandError", err)
			}
			if ce.TimedOut != tt.timedOut || !tt.timedOut && ce.ExitCode != tt.wantStatus {
				t.Errorf("timed out %v status %d; want %v %d", ce.TimedOut, ce.ExitCode, tt.timedOut, tt.wantStatus)
			}
			if len(ce.Stderr) > tailBytes || !strings.HasSuffix(strings.TrimSpace(ce.Stderr), tt.wantTail) {
				t.Errorf("stderr tail of %d bytes ends %q", len(ce.Stderr), ce.Stderr[max(0, len(ce.Stderr)-40):])
			}
			if tt.timedOut && !strings.Contains(err.Error(), "timed out after 200ms") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestExecRunnerEnvironmentAndRefusals(t *testing.T) {
	dir := t.TempDir()
	script, err := filepath.Abs("testdata/runner.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ExecRunner{}.Run(t.Context(), Command{Path: "sh", Args: []string{script, "env"}, Env: []string{"HERMES_HOME=/h"}, Dir: dir, Timeout: time.Minute})
	if err != nil || !strings.HasPrefix(string(out.Stdout), "/usr/local/sbin:") || !strings.Contains(string(out.Stdout), " /h\n"+dir) {
		t.Fatalf("got %q, %v", out.Stdout, err)
	}
	if _, err := (ExecRunner{}).Run(t.Context(), Command{Path: "true"}); err == nil || !strings.Contains(err.Error(), "no timeout") {
		t.Fatalf("no timeout: %v", err)
	}
	if _, err := (ExecRunner{}).Run(t.Context(), Command{Path: filepath.Join(dir, "missing"), Timeout: time.Minute}); err == nil {
		t.Fatal("a missing program ran")
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 5}
	for _, s := range []string{"ab", "cd", "efg", "0123456789"} {
		tl.Write([]byte(s))
	}
	if got := string(tl.Bytes()); got != "56789" {
		t.Fatalf("got %q", got)
	}
	tl = &tail{max: 5}
	tl.Write([]byte("abc"))
	tl.Write([]byte("def"))
	if got := string(tl.Bytes()); got != "bcdef" {
		t.Fatalf("got %q", got)
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries []tartest.Entry
		want    string
	}{
		{"dot-dot", []tartest.Entry{{Name: "a/../../evil", Body: "x", Mode: 0o644}}, `".." component`},
		{"absolute", []tartest.Entry{{Name: "/etc/evil", Body: "x", Mode: 0o644}}, "absolute path"},
		{"absolute link", []tartest.Entry{tartest.Symlink("a/link", "/etc/passwd")}, "points outside"},
		{"relative link out", []tartest.Entry{tartest.Symlink("a/link", "../../x")}, "points outside"},
		{"write through a link", []tartest.Entry{tartest.Symlink("top/l", "."), tartest.Symlink("top/up", ".."), tartest.Symlink("top/up/up2", "..")}, "symlink or non-directory on the way"},
		{"link through a link to the top", []tartest.Entry{tartest.Symlink("y", "."), tartest.Symlink("x", "y/../esc")}, "points outside"},
		{"link through a link replaced later", []tartest.Entry{{Name: "y/", Type: tar.TypeDir}, tartest.Symlink("x", "y/../z"), {Name: "y", Type: tar.TypeSymlink, Link: "."}}, "points outside"},
		{"links that stay inside", []tartest.Entry{{Name: "top/", Type: tar.TypeDir}, tartest.Symlink("top/l", "."), tartest.Symlink("top/x/y", "../l")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := f.provisioner(f.config())
			dest := t.TempDir()
			archive := filepath.Join(t.TempDir(), "a.tar.gz")
			if err := os.WriteFile(archive, tartest.TarGz(t, tt.entries), 0o600); err != nil {
				t.Fatal(err)
			}
			err := p.extractTarGz(archive, dest, extractOpts{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if exists(filepath.Join(filepath.Dir(dest), "evil")) {
				t.Fatal("an entry escaped")
			}
		})
	}
}

func TestExtractStripsAndNormalizes(t *testing.T) {
	f := newFixture(t)
	p := f.provisioner(f.config())
	dest := t.TempDir()
	archive := filepath.Join(t.TempDir(), "a.tar.gz")
	data := tartest.TarGz(t, []tartest.Entry{
		{Name: "./top/", Type: tar.TypeDir, Mode: 0o700},
		{Name: "./top/bin/tool", Body: "#!/bin/sh\n", Mode: 0o700},
		{Name: "./top/share/doc", Body: "doc", Mode: 0o600},
		tartest.Symlink("./top/bin/alias", "tool"),
	})
	if err := os.WriteFile(archive, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.extractTarGz(archive, dest, extractOpts{strip: 1}); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{"bin/tool": 0o755, "share/doc": 0o644, "bin": 0o755} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want %04o", path, fi.Mode(), err, mode)
		}
	}
	if l, _ := os.Readlink(filepath.Join(dest, "bin/alias")); l != "tool" {
		t.Errorf("link %q", l)
	}
	big := filepath.Join(t.TempDir(), "big.tar.gz")
	if err := os.WriteFile(big, tartest.TarGz(t, []tartest.Entry{{Name: "a", Body: strings.Repeat("x", 100), Mode: 0o644}}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.extractTarGz(big, t.TempDir(), extractOpts{maxBytes: 10}); err == nil || !strings.Contains(err.Error(), "beyond 10 bytes") {
		t.Fatalf("size bound: %v", err)
	}
}
