package supervise

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subreaper makes this process a child subreaper: orphans of its
// descendants are reparented to it instead of to PID 1, so a supervisor
// with ReapOrphans must reap them.
func Subreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
	}
	return nil
}

// exitMsg is a reaped child's status.
type exitMsg struct {
	pid    int
	status syscall.WaitStatus
	// lost is set when the status was taken by someone else.
	lost bool
	time time.Time
}

// reaper is the one place that waits for children. Programs are spawned
// through it under its lock and registered before the lock is released, so
// a child that exits at once is never reaped before it is known: the exit
// status of the supervisor's own children always reaches them.
//
// With all set it reaps every child (wait4(-1)), which a subreaper or PID 1
// must do; an unknown pid is an orphan and only logged. Without it, it waits
// for its own pids only and never takes another child's status, so it can
// share a process with os/exec.
type reaper struct {
	mu      sync.Mutex
	all     bool
	owned   map[int]chan<- exitMsg
	orphan  func(pid int, ws syscall.WaitStatus)
	sig     chan os.Signal
	done    chan struct{}
	stopped chan struct{}
}

func newReaper(all bool, orphan func(int, syscall.WaitStatus)) *reaper {
	r := &reaper{
		all: all, owned: map[int]chan<- exitMsg{}, orphan: orphan,
		sig: make(chan os.Signal, 1), done: make(chan struct{}), stopped: make(chan struct{}),
	}
	signal.Notify(r.sig, syscall.SIGCHLD)
	go r.loop()
	return r
}

// spawn runs start under the lock and registers the new pid with ch, which
// must have room for one message.
func (r *reaper) spawn(start func() (int, error), ch chan<- exitMsg) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, err
	}
	r.owned[pid] = ch
	return pid, nil
}

func (r *reaper) loop() {
	defer close(r.stopped)
	r.reap() // children may have exited before Notify
	for {
		select {
		case <-r.sig:
			r.reap()
		case <-r.done:
			return
		}
	}
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.all {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				return
			}
			r.dispatch(exitMsg{pid: pid, status: ws, time: time.Now()})
		}
	}
	for pid := range r.owned {
		var ws syscall.WaitStatus
		got, err := wait4NoIntr(pid, &ws)
		switch {
		case got == pid:
			r.dispatch(exitMsg{pid: pid, status: ws, time: time.Now()})
		case errors.Is(err, syscall.ECHILD):
			// Another waiter in this process took the status.
			r.dispatch(exitMsg{pid: pid, lost: true, time: time.Now()})
		}
	}
}

func wait4NoIntr(pid int, ws *syscall.WaitStatus) (int, error) {
	for {
		got, err := syscall.Wait4(pid, ws, syscall.WNOHANG, nil)
		if !errors.Is(err, syscall.EINTR) {
			return got, err
		}
	}
}

// dispatch hands a status to its program, or reports an orphan. Called with
// the lock held, so no spawn can take the pid number in between, it also
// kills what is left of the program's process group: nothing of a program
// instance outlives its main process.
func (r *reaper) dispatch(m exitMsg) {
	ch, ok := r.owned[m.pid]
	if !ok {
		if r.orphan != nil {
			r.orphan(m.pid, m.status)
		}
		return
	}
	delete(r.owned, m.pid)
	_ = syscall.Kill(-m.pid, syscall.SIGKILL)
	select {
	case ch <- m:
	default: // cannot happen: one live instance per program
	}
}

// close stops the loop. Children still registered are not waited for.
func (r *reaper) close() {
	signal.Stop(r.sig)
	close(r.done)
	<-r.stopped
}
