package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestShell runs `shell` against the fake smolvm's console: the user's
// input reaches a shell in the machine, its output and exit status come
// back, and a stopped box is refused by smolvm with its own message.
func TestShell(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	root := filepath.Join(h.State, "machines", boxtest.Machine, "root")

	r := h.runInput("echo out; echo err >&2; pwd; exit 5\n", "shell")
	if r.code != 5 {
		t.Errorf("shell exited %d, want the shell's 5; stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "out\n"+root+"\n" || !strings.Contains(r.stderr, "err") {
		t.Errorf("shell stdout %q (want out and %s), stderr %q", r.stdout, root, r.stderr)
	}
	boxtest.ExpectCalls(t, r.calls, []string{"machine status --name hermes-box --json", "machine shell --name hermes-box"})

	mustRun(t, h, "stop")
	r = h.runInput("echo never\n", "shell")
	if r.code == 0 || strings.Contains(r.stdout, "never") || !strings.Contains(r.stderr, "not running") {
		t.Errorf("shell on a stopped box exited %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestFollowLogs runs `logs -f`: the last line, then a line appended
// while it follows; Ctrl-C ends it, and the agent that followed the log in
// the box ends too although the log stays quiet.
func TestFollowLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	root := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	logFile := filepath.Join(root, "workspace/hermes-home/logs/hermes-gateway.log")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := h.command(ctx, "logs", "-f", "-n", "1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	boxtest.Must(t, err)
	boxtest.Must(t, cmd.Start())
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("logs -f printed %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("logs -f printed nothing for 20 s (want %q); stderr:\n%s", want, stderr.String())
		}
	}
	next("hermes line 3")
	// The test agent in the box relays through the real agent: two.
	if followers := relayAgents(t, root); len(followers) == 0 {
		t.Fatalf("agents relaying for the box while logs -f runs: %v", followers)
	}
	f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
	boxtest.Must(t, err)
	_, err = f.WriteString("appended while following\n")
	boxtest.Must(t, err)
	boxtest.Must(t, f.Close())
	next("appended while following")

	boxtest.Must(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("logs -f did not end on SIGINT: %v", err)
	}
	// Ctrl-C ends it quietly with 130.
	if cmd.ProcessState.ExitCode() != 130 || strings.Contains(stderr.String(), "hermes-box: ") {
		t.Errorf("logs -f after SIGINT: exit %d, stderr:\n%s", cmd.ProcessState.ExitCode(), stderr.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(relayAgents(t, root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent following the log outlived the host's logs -f: %v", relayAgents(t, root))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relayAgents returns the pids of the agent processes serving a relay
// call for the machine whose root is root.
func relayAgents(t *testing.T, root string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	boxtest.Must(t, err)
	var pids []string
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue // not a process, or it just ended
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if len(args) == 4 && strings.HasSuffix(args[0], "/hermes-box-agent") && args[1] == "--root" && args[2] == root && args[3] == "relay" {
			pids = append(pids, d.Name())
		}
	}
	return pids
}
