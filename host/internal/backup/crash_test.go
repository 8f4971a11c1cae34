package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash tests re-run this test binary as the host process of one
// operation, which SIGKILLs itself when it reaches the step named in
// envCrashAt.
const (
	envCrashOp   = "HB_TEST_CRASH_OP"
	envCrashAt   = "HB_TEST_CRASH_AT"
	envAgentBin  = "HB_TEST_AGENT_BIN"
	envCrashBase = "HB_TEST_CRASH_BASE"
	envBackup    = "HB_TEST_CRASH_BACKUP"
)

// crashHelper runs one operation in the child process.
func crashHelper(op string) int {
	at := os.Getenv(envCrashAt)
	crashPoint = func(step string) {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		}
	}
	w := worldAt(os.Getenv(envCrashBase), os.Getenv(envAgentBin))
	ctx := context.Background()
	unlock, err := Lock(w.state)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer unlock()
	switch op {
	case "snapshot":
		_, err = w.snapshot(ctx, "box", "manual")
	case "restore", "stream-restore":
		var s *Staged
		if op == "restore" {
			s, err = Stage(ctx, os.Getenv(envBackup), w.state, testTrust, Limits{})
		} else {
			meta := Meta{Machine: "box", Now: time.Now(), Signer: testSigner}
			s, err = StageStream(ctx, w.state, meta, v2Parts(os.Getenv(envBackup)))
		}
		if err == nil {
			r := &Restore{Ops: w.m, Machine: "box", Port: 2222, StateDir: w.state, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
			err = r.Run(ctx, s.Dir)
			_ = s.Remove()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func worldAt(base, bin string) *world {
	return &world{state: filepath.Join(base, "state"), m: &dirMachines{
		base: filepath.Join(base, "machines"), template: filepath.Join(base, "image"), bin: bin,
		backups: filepath.Join(base, "backups"), key: testKey, signer: testSigner,
	}}
}

// runCrash runs op in a child that dies at step; it reports whether the
// child was killed (false: it finished first).
func runCrash(t *testing.T, base, op, step, backup string) bool {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashOp+"="+op, envCrashAt+"="+step, envCrashBase+"="+base,
		envAgentBin+"="+agentBinary(t), envBackup+"="+backup)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("%s at %s: %v\n%s", op, step, err, out)
	}
	return false
}

// published lists the backups below dir that verify.
func published(t *testing.T, dir string) (ok []string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), Suffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := Verify(t.Context(), p, testTrust); err != nil {
			t.Errorf("published backup %s does not verify: %v", e.Name(), err)
			continue
		}
		ok = append(ok, p)
	}
	return ok
}

// reapAll is "the next operation": take the lock, reap the leftovers.
func reapAll(t *testing.T, w *world) {
	t.Helper()
	unlock, err := Lock(w.state)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := Reap(w.state, w.m.backups); err != nil {
		t.Fatal(err)
	}
	if _, err := ReapCandidates(t.Context(), w.m, "box"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{w.state, w.m.backups, w.m.base} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") && n != ".trash-box" && n != ".creating-box" || strings.Contains(n, candidateMark) {
				t.Errorf("leftover %s after reaping", filepath.Join(d, n))
			}
		}
	}
}

func TestCrashDuringSnapshot(t *testing.T) {
	steps := []string{"services-stopped", "temp-created", "rootfs-written", "workspace-written", "metadata-written", "published"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			base := t.TempDir()
			w := worldAt(base, agentBinary(t))
			must(t, os.MkdirAll(w.m.base, 0o700))
			w.addMachine(t, "box", "alpha")
			before := treeOf(t, w.m.root("box"), nil)
			if !runCrash(t, base, "snapshot", step, "") {
				t.Fatalf("the snapshot finished before step %s", step)
			}
			// The machine is untouched; a backup is either complete or absent.
			diffTrees(t, before, treeOf(t, w.m.root("box"), nil))
			got := published(t, w.m.backups)
			if step == "published" && len(got) != 1 {
				t.Errorf("killed after publishing, %d backups verify", len(got))
			}
			if step != "published" && len(got) != 0 {
				t.Errorf("killed at %s, yet %v is published", step, got)
			}
			reapAll(t, w)
			if _, err := w.snapshot(t.Context(), "box", "after"); err != nil {
				t.Fatalf("next snapshot: %v", err)
			}
		})
	}
}

func TestCrashDuringRestore(t *testing.T) {
	crashRestore(t, "restore", "stage-created", "services-stopped", "rootfs-written", "published", "safety-snapshot",
		"candidate-created", "candidate-applied", "original-deleted", "primary-created")
}

// TestCrashDuringStreamStage: a restore staged in one pass from a stream
// (an incremental backup's) killed while staging leaves the box as it
// was and a staged directory the next operation reaps; past staging it
// restores through the agent's apply as a staged v2 backup does.
func TestCrashDuringStreamStage(t *testing.T) {
	crashRestore(t, "stream-restore", "stage-created", "rootfs-staged", "workspace-staged", "candidate-applied")
}

// crashRestore kills op (a restore) at each step and checks the restore
// invariant.
func crashRestore(t *testing.T, op string, steps ...string) {
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			base := t.TempDir()
			w := worldAt(base, agentBinary(t))
			must(t, os.MkdirAll(w.m.base, 0o700))
			makeBase(t, w.m.template, "base-image")
			w.addMachine(t, "other", "beta")
			src, err := w.snapshot(t.Context(), "other", "source")
			if err != nil {
				t.Fatal(err)
			}
			must(t, w.m.Delete(t.Context(), "other"))
			w.addMachine(t, "box", "alpha")
			before := treeOf(t, w.m.root("box"), nil)
			if !runCrash(t, base, op, step, src) {
				t.Fatalf("the restore finished before step %s", step)
			}
			checkRestoreInvariant(t, w, before, src)
			reapAll(t, w)
		})
	}
}

// checkRestoreInvariant: the original machine is intact, or a verified
// safety snapshot of it exists; never neither. When the original is gone,
// the journal names the safety snapshot, and restoring from it brings the
// original back.
func checkRestoreInvariant(t *testing.T, w *world, before map[string]entry, src string) {
	t.Helper()
	var safety []string
	for _, p := range published(t, w.m.backups) {
		if p != src && strings.Contains(p, "pre-restore") {
			safety = append(safety, p)
		}
	}
	exists, _ := w.m.Exists(t.Context(), "box")
	journal, err := Interrupted(w.state)
	if err != nil {
		t.Fatal(err)
	}
	if exists && journal == "" {
		diffTrees(t, before, treeOf(t, w.m.root("box"), nil))
		return
	}
	if len(safety) != 1 || journal != safety[0] {
		t.Fatalf("original gone (exists=%v) and safety snapshots %v, journal %q", exists, safety, journal)
	}
	// Recover the way a user would: restore the safety snapshot.
	reapAll(t, w)
	if exists {
		must(t, w.m.Delete(t.Context(), "box"))
	}
	s, err := Stage(t.Context(), journal, w.state, testTrust, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	r := &Restore{Ops: w.m, Machine: "box", Port: 2222, StateDir: w.state, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := r.Run(t.Context(), s.Dir); err != nil {
		t.Fatal(err)
	}
	got := treeOf(t, w.m.root("box"), rootSkip)
	want := map[string]entry{}
	for k, v := range before {
		if !rootSkip(k) {
			want[k] = v
		}
	}
	diffTrees(t, want, got)
}
