package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvRefuses(t *testing.T) {
	good := map[string]string{"HERMES_BOX_E2E": "1", "HERMES_BOX_MACHINE_NAME": "hbx-e2e", "HERMES_BOX_BUILDER_NAME": "hbx-e2e-builder", "HERMES_BOX_SSH_PORT": "2399"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	found := func(string) (string, error) { return "/usr/bin/smolvm", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	tests := []struct {
		name string
		env  map[string]string
		look func(string) (string, error)
		busy int
		want string
	}{
		{"not asked for", with("HERMES_BOX_E2E", ""), found, 0, "set HERMES_BOX_E2E=1"},
		{"no smolvm", good, missing, 0, "no smolvm on PATH"},
		{"no names", with("HERMES_BOX_MACHINE_NAME", ""), found, 0, "disposable names"},
		{"primary machine", with("HERMES_BOX_MACHINE_NAME", "hermes-box"), found, 0, `primary machine "hermes-box"`},
		{"primary builder", with("HERMES_BOX_BUILDER_NAME", "hermes-builder"), found, 0, "primary machine"},
		{"primary ssh port", with("HERMES_BOX_SSH_PORT", "2222"), found, 0, "primary port 2222"},
		{"no ssh port", with("HERMES_BOX_SSH_PORT", ""), found, 0, "set HERMES_BOX_SSH_PORT"},
		{"busy ssh port", good, found, 2399, "port 2399 is in use"},
		{"executor without port", with("HERMES_BOX_EXECUTOR_ENABLED", "true"), found, 0, "set HERMES_BOX_EXECUTOR_PORT"},
		{"primary executor port", func() map[string]string {
			m := with("HERMES_BOX_EXECUTOR_ENABLED", "true")
			m["HERMES_BOX_EXECUTOR_PORT"] = "4788"
			return m
		}(), found, 0, "primary port 4788"},
		{"disposable", good, found, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free := func(p int) bool { return p != tt.busy }
			c, err := FromEnv(Env{Getenv: envOf(tt.env), LookPath: tt.look, PortFree: free}, "/bin/hermes-box")
			if tt.want == "" {
				if err != nil || c.Machine != "hbx-e2e" || c.SSHPort != 2399 || c.Smolvm != "/usr/bin/smolvm" {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestFromEnvFindsTheFakeSmolvm: with the repository's fake smolvm on
// PATH (exec.LookPath, as make e2e-smolvm runs it), the run is accepted;
// with PATH empty of it, refused.
func TestFromEnvFindsTheFakeSmolvm(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "smolvm"), "github.com/hermes-box/hermes-box/tests/fakesmolvm").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake smolvm: %v\n%s", err, out)
	}
	env := map[string]string{"HERMES_BOX_E2E": "1", "HERMES_BOX_MACHINE_NAME": "a", "HERMES_BOX_BUILDER_NAME": "b", "HERMES_BOX_SSH_PORT": "2399"}
	t.Setenv("PATH", dir)
	c, err := FromEnv(Env{Getenv: envOf(env), LookPath: exec.LookPath, PortFree: func(int) bool { return true }}, "x")
	if err != nil || c.Smolvm != filepath.Join(dir, "smolvm") {
		t.Fatalf("with the fake on PATH: %+v, %v", c, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := FromEnv(Env{Getenv: envOf(env), LookPath: exec.LookPath}, "x"); err == nil || !strings.Contains(err.Error(), "no smolvm on PATH") {
		t.Fatalf("without smolvm: %v", err)
	}
}

// fakeBox is a hermes-box that keeps a box's state in memory: whether it
// exists, the note's text, and the backups' texts.
type fakeBox struct {
	exists  bool
	note    string
	backups map[string]string
	failOn  string
	calls   []string
	envs    [][]string
}

func (f *fakeBox) Run(_ context.Context, env []string, args ...string) (Result, error) {
	line := strings.Join(args, " ")
	f.calls = append(f.calls, line)
	f.envs = append(f.envs, env)
	if f.failOn != "" && strings.HasPrefix(line, f.failOn) {
		return Result{Code: 1, Stderr: "hermes-box: " + f.failOn + " broke"}, nil
	}
	switch {
	case args[0] == "doctor":
	case args[0] == "init":
		f.exists = true
	case args[0] == "destroy":
		f.exists = false
	case !f.exists:
		return Result{Code: 1, Stderr: "no box"}, nil
	case line == "status --json":
		b, _ := json.Marshal(health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy, Checks: map[health.Code]health.Check{}, Services: []health.Service{}})
		return Result{Stdout: string(b)}, nil
	case args[0] == "snapshot":
		f.backups["/b/1"] = f.note
		return Result{Stdout: "writing…\n/b/1\n"}, nil
	case args[0] == "ssh" && line == "ssh -- sudo -n true":
		return Result{Code: 1}, nil
	case args[0] == "ssh" && strings.Contains(line, "printf "):
		f.note = strings.Fields(line[strings.Index(line, "printf ")+7:])[0]
	case args[0] == "ssh" && strings.Contains(line, "cat "+note):
		return Result{Stdout: f.note + "\n"}, nil
	}
	return Result{}, nil
}

func newRun(t *testing.T, f *fakeBox, exe bool) *Lifecycle {
	t.Helper()
	cfg := Config{Machine: "hbx-e2e", Builder: "hbx-b", SSHPort: 2399, ExecutorEnabled: exe, ExecutorPort: 14788}
	l, err := New(cfg, []string{"PATH=/bin", "HERMES_BOX_MACHINE_NAME=hermes-box"}, t.TempDir(), f)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Unix(0, 0)
	l.now = func() time.Time { tick = tick.Add(time.Second); return tick }
	return l
}

func TestRunPhases(t *testing.T) {
	f := &fakeBox{backups: map[string]string{}}
	r := &restoringBox{f}
	l := newRun(t, f, false)
	l.run = r
	if err := l.Run(t.Context()); err != nil {
		var buf bytes.Buffer
		l.PrintTable(&buf)
		t.Fatalf("%v\n%s", err, buf.String())
	}
	var names []string
	for _, p := range l.Phases {
		names = append(names, p.Name+"="+strings.SplitN(p.Outcome, ":", 2)[0])
	}
	want := "doctor=ok init=ok status=ok ssh=ok logs=ok write note=ok snapshot=ok change note=ok restore (replacement)=ok " +
		"executor status=skipped destroy=ok restore (fresh)=ok destroy (final)=ok"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("phases:\n%s\nwant\n%s", got, want)
	}
	// The run's environment: its own names, port, config and data dir; the
	// caller's HERMES_BOX_* settings dropped.
	env := strings.Join(f.envs[0], "\n")
	for _, w := range []string{"HERMES_BOX_MACHINE_NAME=hbx-e2e", "HERMES_BOX_SSH_PORT=2399", "HERMES_BOX_CONFIG=", "HERMES_BOX_DATA_DIR="} {
		if !strings.Contains(env, w) {
			t.Errorf("environment lacks %s:\n%s", w, env)
		}
	}
	if strings.Contains(env, "HERMES_BOX_MACHINE_NAME=hermes-box") {
		t.Error("the caller's machine name leaked into the run")
	}
	var buf bytes.Buffer
	l.PrintTable(&buf)
	if !strings.Contains(buf.String(), "restore (fresh)") || !strings.Contains(buf.String(), "total") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// restoringBox adds restore to fakeBox: the note comes back from the backup.
type restoringBox struct{ *fakeBox }

func (r *restoringBox) Run(ctx context.Context, env []string, args ...string) (Result, error) {
	if args[0] == "restore" && (r.failOn == "" || !strings.HasPrefix("restore", r.failOn)) {
		r.calls = append(r.calls, strings.Join(args, " "))
		r.envs = append(r.envs, env)
		text, ok := r.backups[args[1]]
		if !ok {
			return Result{Code: 1, Stderr: "no backup " + args[1]}, nil
		}
		r.exists, r.note = true, text
		return Result{}, nil
	}
	return r.fakeBox.Run(ctx, env, args...)
}

// TestRunFailureCleansUp: a failing phase stops the run, is named in the
// error and the table, and the disposable box is destroyed anyway.
func TestRunFailureCleansUp(t *testing.T) {
	f := &fakeBox{backups: map[string]string{}, failOn: "snapshot"}
	l := newRun(t, f, false)
	l.run = &restoringBox{f}
	err := l.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "phase snapshot") || !strings.Contains(err.Error(), "snapshot broke") {
		t.Fatalf("got %v", err)
	}
	last := l.Phases[len(l.Phases)-1]
	if last.Name != "cleanup: destroy --force" || f.calls[len(f.calls)-1] != "destroy --force" || f.exists {
		t.Fatalf("no cleanup: %+v, calls %v", last, f.calls)
	}
	if p := l.Phases[len(l.Phases)-2]; p.Name != "snapshot" || !strings.HasPrefix(p.Outcome, "failed: ") {
		t.Fatalf("failed phase %+v", p)
	}
}

// TestRunChecksTheRestoredNote: a restore that brings back the wrong
// workspace fails its phase.
func TestRunChecksTheRestoredNote(t *testing.T) {
	f := &fakeBox{backups: map[string]string{}}
	l := newRun(t, f, true)
	l.run = f // restore keeps the changed note
	err := l.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), `holds "after-snapshot" after the restore`) {
		t.Fatalf("got %v", err)
	}
}
