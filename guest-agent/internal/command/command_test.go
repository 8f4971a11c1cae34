package command

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

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

func TestExecRunnerCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs the tests as root")
		}
		t.Skip("running as another user needs root")
	}
	out, err := ExecRunner{}.Run(t.Context(), Command{Path: lookPath(t, "id"), Args: []string{"-u"}, Timeout: time.Minute,
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	if err != nil || strings.TrimSpace(string(out.Stdout)) != "65534" {
		t.Fatalf("got %q, %v", out.Stdout, err)
	}
}
