package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestHostileHangUpSnapshot: a snapshot whose terminal goes away with the
// box's services stopped (SIGHUP: a closed window or SSH session; its
// output pipe closed: `hermes-box snapshot x 2>&1 | head -3`) ends as
// Ctrl-C does: status 130, the services started again, the box healthy.
func TestHostileHangUpSnapshot(t *testing.T) {
	t.Parallel()
	t.Run("SIGHUP", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		initBox(t, h)
		f := h.Hostile("snapshot.chunks", "hang")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		r := signalWhen(t, h.command(ctx, "snapshot", "x"), syscall.SIGHUP, func(string) bool {
			_, err := os.Stat(f + ".reached")
			return err == nil
		})
		boxtest.Must(t, os.Remove(f))
		expectEndedSoon(t, "snapshot hung up in its stream", r)
		if !strings.Contains(r.stderr, "snapshot interrupted") || !strings.Contains(r.stderr, "hermes-box is running, as it was") {
			t.Errorf("the hung-up snapshot does not say the state it left:\n%s", r.stderr)
		}
		expectHealthy(t, h, "after the hung-up snapshot")
	})
	t.Run("closed output", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		initBox(t, h)
		// The second part's stream takes 4 s: the reader goes once the
		// first part's line is read, and the second's comes after, with
		// the services stopped.
		h.Hostile("snapshot.chunks", "from:2:drip:4s")
		code, seen := snapshotIntoClosedPipe(t, h)
		t.Logf("snapshot into a pipe closed after %q: exit %d", seen, code)
		if code != 130 {
			t.Errorf("exit %d after its output was closed, want 130", code)
		}
		expectHealthy(t, h, "after the snapshot whose output was closed")
	})
}

// snapshotIntoClosedPipe runs `hermes-box snapshot x 2>&1 | head`, where
// head reads up to the line of the snapshot's first part, then exits; it returns
// hermes-box's exit status and the last line read.
func snapshotIntoClosedPipe(t *testing.T, h *harness) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pr, pw, err := os.Pipe()
	boxtest.Must(t, err)
	cmd := h.command(ctx, "snapshot", "x")
	cmd.Stdout, cmd.Stderr = pw, pw
	boxtest.Must(t, cmd.Start())
	pw.Close()
	sc := bufio.NewScanner(pr)
	var line string
	for sc.Scan() {
		if line = sc.Text(); partLine(line) {
			break
		}
	}
	pr.Close()
	err = cmd.Wait()
	if !partLine(line) {
		t.Fatalf("the snapshot never printed its first part's line (last line %q): %v", line, err)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Errorf("hermes-box was killed by %v", ws.Signal())
		}
		return ee.ExitCode(), line
	}
	boxtest.Must(t, err)
	return 0, line
}

// TestSnapshotResumesServicesOfKilledRun: a snapshot killed (SIGKILL,
// nothing handled) while the box's services are stopped leaves them
// stopped; the next snapshot starts them again and says so, and returns
// the box to its state before the first: running and healthy.
func TestSnapshotResumesServicesOfKilledRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	f := h.Hostile("snapshot.chunks", "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := signalWhen(t, h.command(ctx, "snapshot", "x"), syscall.SIGKILL, func(string) bool {
		_, err := os.Stat(f + ".reached")
		return err == nil
	})
	boxtest.Must(t, os.Remove(f))
	t.Logf("the killed snapshot: exit %d", r.code)
	// Its lock holder is gone: status says unhealthy, not busy, and what
	// to run.
	if st := h.run("status"); st.code != 1 || !strings.Contains(st.stdout, "unhealthy") || !strings.Contains(st.stdout, "next: hermes-box logs") {
		t.Errorf("status after the killed snapshot: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	r = mustRun(t, h, "snapshot", "y")
	if !strings.Contains(r.stderr, "an earlier snapshot was interrupted and left hermes stopped; started again") {
		t.Errorf("the next snapshot does not say it started the services again:\n%s", r.stderr)
	}
	expectHealthy(t, h, "after the snapshot that followed the killed one")
}

// partLine is the line a snapshot prints when a part is in.
func partLine(line string) bool {
	return strings.HasPrefix(line, "snapshot ") && strings.Contains(line, ": read ")
}

// TestStatusDuringSnapshot: `status` while a snapshot holds the box (its
// services stopped) says busy, exit 5, and names the snapshot, not
// unhealthy (exit 1, which a monitor alerts on every night); --json's
// .state is busy and .operation the command.
func TestStatusDuringSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	f := h.Hostile("snapshot.chunks", "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var st, js result
	r := signalWhen(t, h.command(ctx, "snapshot", "nightly"), os.Interrupt, func(string) bool {
		if _, err := os.Stat(f + ".reached"); err != nil {
			return false
		}
		st, js = h.run("status"), h.run("status", "--json")
		return true
	})
	boxtest.Must(t, os.Remove(f))
	expectEndedSoon(t, "the snapshot status was asked during", r)
	if st.code != 5 || !strings.Contains(st.stdout, "busy") || !strings.Contains(st.stdout, "in progress: ") ||
		!strings.Contains(st.stdout, "snapshot nightly") {
		t.Errorf("status during a snapshot: exit %d, want 5, busy and the snapshot named\n%s%s", st.code, st.stdout, st.stderr)
	}
	var got struct{ State, Operation string }
	if err := json.Unmarshal([]byte(js.stdout), &got); err != nil || js.code != 5 || got.State != "busy" ||
		!strings.Contains(got.Operation, "snapshot nightly") {
		t.Errorf("status --json during a snapshot: exit %d, state %q, operation %q (%v)", js.code, got.State, got.Operation, err)
	}
	if st := h.run("status"); st.code != 0 {
		t.Errorf("status after the snapshot: exit %d\n%s", st.code, st.stdout)
	}
}

// TestSmolvmOutsideTableAfterInit: smolvm upgraded past the table under a
// running box: status says so and names hermes-box doctor; restart refuses
// before it stops anything (it used to stop the box, then refuse to start
// it), and its next step is doctor, not --debug.
func TestSmolvmOutsideTableAfterInit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.16.2")
	r := h.run("status")
	if r.code != 1 || !strings.Contains(r.stdout, "smolvm-release") || !strings.Contains(r.stdout, "smolvm 1.16.2 is not a release hermes-box supports") ||
		!strings.Contains(r.stdout, "next: hermes-box doctor") {
		t.Errorf("status with smolvm 1.16.2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = h.run("restart")
	if r.code == 0 || !strings.Contains(r.stderr, "smolvm 1.16.2 is not a release hermes-box supports") ||
		!strings.Contains(r.stderr, "hermes-box doctor") || strings.Contains(r.stderr, "--debug") {
		t.Errorf("restart with smolvm 1.16.2: exit %d\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(r.calls, `^machine stop `); i >= 0 {
		t.Errorf("restart stopped the box before refusing the release: %s", r.calls[i].Line)
	}
	if got := h.Machines()[boxtest.Machine]; got != "running" {
		t.Errorf("after the refused restart the box is %s", got)
	}
}
