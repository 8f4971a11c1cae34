package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// interruptWhen runs hermes-box with p's environment, sends SIGINT once
// ready says so, and returns how the command ended.
func (p *executorProject) interruptWhen(ready func(stdout string) bool, args ...string) result {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.hermesBox, args...)
	cmd.Env = p.env
	return interruptWhen(p.t, cmd, ready)
}

// TestExecutorCtrlC: the first Ctrl-C ends an executor command quietly with
// status 130 where the box keeps it waiting: `executor status` on an
// Executor that takes the request and never answers (the request is
// abandoned, not left open), and `executor logs -f` following the log over
// the relay.
func TestExecutorCtrlC(t *testing.T) {
	t.Parallel()
	t.Run("status on a silent Executor", func(t *testing.T) {
		arrived, abandoned := make(chan struct{}, 1), make(chan struct{}, 1)
		release := make(chan struct{})
		silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case arrived <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
				abandoned <- struct{}{}
			case <-release:
			}
		}))
		defer silent.Close()
		defer close(release)
		p := newExecutorProject(t)
		p.env = append(p.env, "FAKESMOLVM_GUEST_4788="+strings.TrimPrefix(silent.URL, "http://"))
		p.boot(true)
		r := p.interruptWhen(func(string) bool { return len(arrived) > 0 }, "executor", "status", "--json")
		expectEndedSoon(t, "executor status on a silent Executor", r)
		expectQuiet(t, r)
		if r.stdout != "" {
			t.Errorf("an interrupted executor status printed a report:\n%s", r.stdout)
		}
		select {
		case <-abandoned:
		case <-time.After(interruptBound):
			t.Error("the request to the silent Executor was still open after the command ended")
		}
	})
	t.Run("logs -f", func(t *testing.T) {
		p := newExecutorProject(t)
		p.boot(true)
		r := p.interruptWhen(func(out string) bool { return strings.Contains(out, "three\n") }, "executor", "logs", "-f")
		expectEndedSoon(t, "executor logs -f", r)
		expectQuiet(t, r)
		if !strings.HasPrefix(r.stdout, "one\ntwo\nthree\n") {
			t.Errorf("executor logs -f printed %q", r.stdout)
		}
	})
}

// TestStatusCtrlC: Ctrl-C while the box's agent keeps `status` waiting
// ends it with 130 and no report: the calls it cut short say nothing of the
// box (before, it printed "agent unreachable: context canceled" and exited
// 1, unhealthy).
func TestStatusCtrlC(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			h := newHarness(t)
			initBox(t, h)
			f := h.Hostile("health", "hang")
			r := h.runInterrupted(f+".reached", args...)
			boxtest.Must(t, os.Remove(f))
			expectEndedSoon(t, "status with the agent hanging", r)
			expectQuiet(t, r)
			if r.stdout != "" {
				t.Errorf("an interrupted status printed a report:\n%s", r.stdout)
			}
		})
	}
}

// expectQuiet: an interrupted command says so in one line, without a
// stack of errors.
func expectQuiet(t *testing.T, r result) {
	t.Helper()
	if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; strings.TrimSpace(r.stderr) != "" && lines > 1 {
		t.Errorf("stderr after Ctrl-C has %d lines:\n%s", lines, r.stderr)
	}
}
