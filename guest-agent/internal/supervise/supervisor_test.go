package supervise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newSup starts a supervisor that is closed when the test ends.
func newSup(t *testing.T, o Options, progs ...Program) *Supervisor {
	t.Helper()
	if o.BackoffUnit == 0 {
		o.BackoffUnit = 10 * time.Millisecond
	}
	s, err := New(progs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func statusOf(t *testing.T, s *Supervisor, name string) Status {
	t.Helper()
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no program %q", name)
	return Status{}
}

func waitState(t *testing.T, s *Supervisor, name string, want State) Status {
	t.Helper()
	var st Status
	eventually(t, 10*time.Second, name+" "+string(want), func() bool {
		st = statusOf(t, s, name)
		return st.State == want
	})
	return st
}

// recorder collects events.
type recorder struct {
	mu sync.Mutex
	ev []Event
}

func (r *recorder) add(e Event) { r.mu.Lock(); r.ev = append(r.ev, e); r.mu.Unlock() }

// names returns the programs that entered state to, in order.
func (r *recorder) names(to State) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.ev {
		if e.To == to {
			out = append(out, e.Program)
		}
	}
	return out
}

func TestStartAndStopOrderByPriority(t *testing.T) {
	var rec recorder
	mk := func(name string, prio int, auto bool) Program {
		p := Program{Name: name, Command: []string{"sleep", "1000"}, Priority: prio, AutoStart: auto}
		return p
	}
	s := newSup(t, Options{OnEvent: rec.add}, mk("gateway", 40, true), mk("sshd", 10, true), mk("manual", 5, false), mk("executor", 30, true))
	if err := s.StartAutostart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.names(Starting), []string{"sshd", "executor", "gateway"}; !slices.Equal(got, want) {
		t.Fatalf("start order %v, want %v", got, want)
	}
	for _, n := range []string{"sshd", "executor", "gateway"} {
		waitState(t, s, n, Running)
	}
	if st := statusOf(t, s, "manual"); st.State != Stopped {
		t.Fatalf("manual is %s, want STOPPED (autostart false)", st.State)
	}
	if err := s.StopAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.names(Stopping), []string{"gateway", "executor", "sshd"}; !slices.Equal(got, want) {
		t.Fatalf("stop order %v, want %v", got, want)
	}
}

func TestAutorestart(t *testing.T) {
	tests := []struct {
		name    string
		policy  Restart
		command string
		codes   []int
		restart bool
	}{
		{"unexpected, exit 0 stays EXITED", RestartUnexpected, "true", nil, false},
		{"unexpected, exit 1 restarts", RestartUnexpected, "false", nil, true},
		{"unexpected, exit 1 listed as expected", RestartUnexpected, "false", []int{0, 1}, false},
		{"true, exit 0 restarts", RestartAlways, "true", nil, true},
		{"false, exit 1 stays EXITED", RestartNever, "false", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Program{Name: "p", Command: []string{tt.command}, AutoStart: true, AutoRestart: tt.policy, ExitCodes: tt.codes}
			s := newSup(t, Options{}, p)
			if err := s.StartAutostart(t.Context()); err != nil {
				t.Fatal(err)
			}
			if tt.restart {
				eventually(t, 10*time.Second, "3 restarts", func() bool { return statusOf(t, s, "p").Restarts >= 3 })
				return
			}
			st := waitState(t, s, "p", Exited)
			time.Sleep(300 * time.Millisecond)
			if st = statusOf(t, s, "p"); st.State != Exited || st.Restarts != 0 || st.LastExit == nil {
				t.Fatalf("got %s with %d restarts (last exit %v), want EXITED and no restart", st.State, st.Restarts, st.LastExit)
			}
		})
	}
}

func TestCrashLoopEndsFatal(t *testing.T) {
	var rec recorder
	p := Program{Name: "crash", Command: []string{"false"}, AutoStart: true, StartTime: time.Second, StartRetries: 3}
	s := newSup(t, Options{OnEvent: rec.add}, p)
	if err := s.StartAutostart(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "crash", Fatal)
	if n := len(rec.names(Starting)); n != 4 {
		t.Fatalf("%d attempts, want 1 + startretries = 4", n)
	}
	if n := len(rec.names(Backoff)); n != 3 {
		t.Fatalf("%d BACKOFF entries, want 3", n)
	}
	if !strings.Contains(st.Description(), "exited too quickly") || st.LastExit.Code != 1 {
		t.Fatalf("description %q, last exit %+v", st.Description(), st.LastExit)
	}
	// Start from FATAL tries again and reports the failure.
	if err := s.Start(t.Context(), "crash"); err == nil || !strings.Contains(err.Error(), "FATAL") {
		t.Fatalf("start of a crashing program: %v, want a FATAL error", err)
	}
}

func TestSpawnErrorEndsFatal(t *testing.T) {
	p := Program{Name: "missing", Command: []string{"/nonexistent/program"}, AutoStart: true, StartRetries: 1}
	s := newSup(t, Options{}, p)
	if err := s.StartAutostart(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "missing", Fatal)
	if !strings.Contains(st.Error, "no such file") {
		t.Fatalf("error %q, want the spawn error", st.Error)
	}
}

func TestStopWaitKillsProgramIgnoringTerm(t *testing.T) {
	p := helper(t, "stubborn", "ignore-term")
	p.StopWait = 300 * time.Millisecond
	p.Log = Log{Path: filepath.Join(t.TempDir(), "stubborn.log")}
	s := newSup(t, Options{}, p)
	if err := s.Start(t.Context(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "helper ready", func() bool {
		b, _ := os.ReadFile(p.Log.Path)
		return bytes.Contains(b, []byte("ready"))
	})
	pid := statusOf(t, s, "stubborn").PID
	begin := time.Now()
	if err := s.Stop(t.Context(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < p.StopWait {
		t.Fatalf("stopped after %s, before stopwait %s: SIGTERM was not ignored?", took, p.StopWait)
	}
	st := statusOf(t, s, "stubborn")
	if st.State != Stopped || st.LastExit == nil || st.LastExit.Signal != "KILL" {
		t.Fatalf("got %s, last exit %v; want STOPPED after SIGKILL", st.State, st.LastExit)
	}
	if alive(t, pid) {
		t.Fatalf("pid %d still alive", pid)
	}
}

func TestGrandchildrenDieWithTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	p := helper(t, "parent", "grandchild", pidFile)
	s := newSup(t, Options{}, p)
	if err := s.Start(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	grand := readPID(t, pidFile)
	if !alive(t, grand) {
		t.Fatalf("grandchild %d not running", grand)
	}
	if err := s.Stop(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	// The leader died of SIGTERM; the grandchild ignores SIGTERM and must
	// still be gone, killed with the group.
	if st := statusOf(t, s, "parent"); st.LastExit == nil || st.LastExit.Signal != "TERM" {
		t.Fatalf("leader: %v, want killed by SIGTERM", st.LastExit)
	}
	eventually(t, 5*time.Second, "grandchild gone", func() bool { return !alive(t, grand) })
}

// TestOrphanIsReaped runs a subreaper in a child process (the test binary as
// "miniboot") supervising a shell that leaves an orphan behind. With
// ReapOrphans the orphan disappears once it exits; without, it stays a
// zombie of the subreaper, which shows the check can fail.
func TestOrphanIsReaped(t *testing.T) {
	for _, reap := range []bool{true, false} {
		t.Run("reap="+strconv.FormatBool(reap), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "orphan.pid")
			prog := Program{
				Name: "leaver", AutoStart: true,
				Command: []string{"/bin/sh", "-c", `(sleep 2 & echo $! > "$1"); exec sleep 1000`, "sh", pidFile},
			}
			progs, _ := json.Marshal([]Program{prog})
			exe, _ := os.Executable()
			cmd := exec.CommandContext(t.Context(), exe)
			cmd.Env = append(os.Environ(), helperEnv+"=miniboot", "MINIBOOT_PROGRAMS="+string(progs), "MINIBOOT_REAP="+map[bool]string{true: "1"}[reap])
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				if err := cmd.Wait(); err != nil {
					t.Errorf("miniboot: %v: %s", err, stderr.String())
				}
			}()
			orphan := readPID(t, pidFile)
			// The pid file is written before the subshell that forked the
			// orphan exits; the orphan is reparented once it has.
			eventually(t, 1500*time.Millisecond, "the orphan reparented to the subreaper", func() bool {
				_, ppid := procState(t, orphan)
				return ppid == cmd.Process.Pid
			})
			time.Sleep(2200 * time.Millisecond) // the orphan exits after 2 s
			if reap {
				eventually(t, 5*time.Second, "orphan reaped", func() bool { st, _ := procState(t, orphan); return st == "" })
				return
			}
			if st, _ := procState(t, orphan); st != "Z" {
				t.Fatalf("without reaping, orphan state %q, want a zombie (Z)", st)
			}
		})
	}
}

func TestLogRotatesAtSizeLimit(t *testing.T) {
	dir := t.TempDir()
	p := helper(t, "spew", "spew", "200") // 200 lines of 100 bytes
	p.Log = Log{Path: filepath.Join(dir, "spew.log"), MaxBytes: 4000, Backups: 2}
	s := newSup(t, Options{}, p)
	if err := s.Start(t.Context(), "spew"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "last line logged", func() bool {
		b, _ := os.ReadFile(p.Log.Path)
		return bytes.Contains(b, []byte("line 000199"))
	})
	for _, name := range []string{"spew.log", "spew.log.1", "spew.log.2"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 0 || fi.Size() > p.Log.MaxBytes {
			t.Errorf("%s has %d bytes, want 1..%d", name, fi.Size(), p.Log.MaxBytes)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "spew.log.3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spew.log.3 exists (%v); only 2 backups are kept", err)
	}
	one, _ := os.ReadFile(filepath.Join(dir, "spew.log.1"))
	cur, _ := os.ReadFile(p.Log.Path)
	if !bytes.HasSuffix(one, []byte("\n")) || len(one)+len(cur) < 4000 {
		t.Errorf("backup does not end on a line or is short: %d + %d bytes", len(one), len(cur))
	}
}

func TestUnknownProgramAndValidation(t *testing.T) {
	s := newSup(t, Options{}, Program{Name: "ok", Command: []string{"true"}})
	if err := s.Start(t.Context(), "nope"); !errors.Is(err, ErrUnknownProgram) {
		t.Fatalf("start nope: %v", err)
	}
	tests := []struct {
		name string
		p    Program
		want string
	}{
		{"empty command", Program{Name: "a"}, `program "a": command: is empty`},
		{"bad name", Program{Name: "a b", Command: []string{"x"}}, `program "a b": name`},
		{"reserved name", Program{Name: "all", Command: []string{"x"}}, `program "all": name`},
		{"bad policy", Program{Name: "a", Command: []string{"x"}, AutoRestart: "sometimes"}, `autorestart: want true, false or unexpected, got "sometimes"`},
		{"bad exit code", Program{Name: "a", Command: []string{"x"}, ExitCodes: []int{256}}, `exitcodes: 256`},
		{"negative retries", Program{Name: "a", Command: []string{"x"}, StartRetries: -1}, `startretries`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New([]Program{tt.p}, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := New([]Program{{Name: "a", Command: []string{"x"}}, {Name: "a", Command: []string{"x"}}}, Options{}); err == nil {
		t.Fatal("duplicate names accepted")
	}
}

func TestRunsAsUserWithSupplementaryGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; setuid needs it")
		}
		t.Skip("setuid/setgid needs root")
	}
	p := Program{Name: "nobody", Command: []string{"sleep", "1000"}, AutoStart: true, User: "nobody",
		Credential: &Credential{UID: 65534, GID: 65534, Groups: []uint32{100, 65534}}}
	s := newSup(t, Options{}, p)
	if err := s.Start(t.Context(), "nobody"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(statusOf(t, s, "nobody").PID) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65534\t65534\t65534\t65534", "Gid:\t65534\t65534\t65534\t65534", "Groups:\t100 65534"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/proc status lacks %q:\n%s", want, b)
		}
	}
}

func TestStartWaitsForStartTime(t *testing.T) {
	p := Program{Name: "slow", Command: []string{"sleep", "1000"}, StartTime: 200 * time.Millisecond, Env: []string{"A=1", "A=2"}}
	s := newSup(t, Options{}, p)
	begin := time.Now()
	if err := s.Start(t.Context(), "slow"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < p.StartTime {
		t.Fatalf("RUNNING after %s, before startsecs", took)
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(statusOf(t, s, "slow").PID) + "/environ")
	if strings.Count(string(b), "\x00A=") != 1 || !strings.Contains(string(b), "\x00A=2\x00") {
		t.Fatalf("environment has A set more than once or to the wrong value")
	}
	if err := s.Restart(t.Context(), "slow"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, s, "slow"); st.State != Running || !strings.HasPrefix(st.Description(), "pid ") {
		t.Fatalf("after restart: %s %q", st.State, st.Description())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Stop(ctx, "slow"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop with a cancelled context: %v", err)
	}
}

// TestStartCountsAShortRun shows Start succeeds for a program that reaches
// RUNNING (startsecs 0) and exits before the caller looks: it started.
// Before runCount, such a Start saw EXITED and failed now and then.
func TestStartCountsAShortRun(t *testing.T) {
	for _, restart := range []Restart{RestartNever, RestartAlways} {
		t.Run(string(restart), func(t *testing.T) {
			s, err := New([]Program{{Name: "blink", Command: []string{"true"}, AutoRestart: restart}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 30 {
				if err := s.Start(t.Context(), "blink"); err != nil {
					t.Fatalf("start %d: %v", i, err)
				}
				if err := s.Stop(t.Context(), "blink"); err != nil {
					t.Fatalf("stop %d: %v", i, err)
				}
			}
		})
	}
}
