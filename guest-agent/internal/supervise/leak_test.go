package supervise

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle waits until the goroutine and fd counts come back to want.
func settle(t *testing.T, what string, wantG, wantFD int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g, fd := runtime.NumGoroutine(), openFDs(t)
		if g <= wantG && fd <= wantFD {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%s: %d goroutines (want %d), %d fds (want %d)\n%s", what, g, wantG, fd, wantFD, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoLeaksAcrossRestarts restarts programs hundreds of times (automatic
// restarts of a program that exits at once, and start/stop cycles of a
// logged one) and checks that goroutines and open fds come back to what
// they were, first with the supervisor idle, then after Close.
func TestNoLeaksAcrossRestarts(t *testing.T) {
	// os/signal starts one goroutine per process on first use, for good.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGCHLD)
	signal.Stop(c)
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	looper := Program{Name: "looper", Command: []string{"true"}, AutoRestart: RestartAlways,
		Log: Log{Path: t.TempDir() + "/looper.log", MaxBytes: 1 << 10, Backups: 1}}
	cycler := Program{Name: "cycler", Command: []string{"sleep", "1000"},
		Log: Log{Path: t.TempDir() + "/cycler.log", MaxBytes: 1 << 10, Backups: 1}}
	s, err := New([]Program{looper, cycler}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	idleG, idleFD := runtime.NumGoroutine(), openFDs(t)

	if err := s.Start(t.Context(), "looper"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "300 restarts", func() bool { return statusOf(t, s, "looper").Restarts >= 300 })
	if err := s.Stop(t.Context(), "looper"); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := s.Start(t.Context(), "cycler"); err != nil {
			t.Fatal(err)
		}
		if err := s.Stop(t.Context(), "cycler"); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, "idle after restarts", idleG, idleFD)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	settle(t, "after Close", baseG, baseFD)
}
