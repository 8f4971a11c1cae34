package supervise

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a small test program instead of
// running the tests: TestMain dispatches on its value.
const helperEnv = "SUPERVISE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helper is the program table entry for the test binary in one mode.
func helper(t testing.TB, name, mode string, args ...string) Program {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Program{
		Name: name, Command: append([]string{exe}, args...), Env: []string{helperEnv + "=" + mode},
		AutoStart: true, StartTime: 0, StopWait: 5 * time.Second,
	}
}

func runHelper(mode string, args []string) int {
	switch mode {
	case "sleep":
		time.Sleep(time.Hour)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "spew": // spew LINES: numbered 100-byte lines on stdout
		n, _ := strconv.Atoi(args[0])
		for i := range n {
			fmt.Printf("%-99s\n", fmt.Sprintf("line %06d", i))
		}
		time.Sleep(time.Hour)
	case "grandchild": // grandchild FILE: a child that ignores SIGTERM, in our group
		exe, _ := os.Executable()
		c := exec.CommandContext(context.Background(), exe)
		c.Env = append(os.Environ(), helperEnv+"=ignore-term")
		c.Stdout = os.Stdout
		if err := c.Start(); err != nil {
			return 3
		}
		_ = os.WriteFile(args[0], []byte(strconv.Itoa(c.Process.Pid)), 0o600)
		time.Sleep(time.Hour)
	case "miniboot":
		return miniboot()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	return 0
}

// miniboot is a tiny boot: a subreaper supervising the programs in
// MINIBOOT_PROGRAMS until SIGTERM.
func miniboot() int {
	var progs []Program
	if err := json.Unmarshal([]byte(os.Getenv("MINIBOOT_PROGRAMS")), &progs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := Subreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s, err := New(progs, Options{ReapOrphans: os.Getenv("MINIBOOT_REAP") == "1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.StartAutostart(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("started")
	<-ctx.Done()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// procState returns the state letter of pid from /proc/<pid>/stat and its
// parent, or "" when the process is gone.
func procState(t testing.TB, pid int) (state string, ppid int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0
	}
	// The command name is in parentheses and may contain spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid
}

// alive reports whether pid exists and is not a zombie.
func alive(t testing.TB, pid int) bool {
	st, _ := procState(t, pid)
	return st != "" && st != "Z"
}

// eventually polls cond every 10 ms for up to d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t testing.TB, path string) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}
