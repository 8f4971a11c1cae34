package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

type cmdKind int

const (
	cmdStart cmdKind = iota
	cmdStop
)

type cmd struct {
	kind cmdKind
	ack  chan error
}

// proc is one program. Its state changes only in its own goroutine (loop);
// mu guards the snapshot that readers see.
type proc struct {
	s     *Supervisor
	p     Program
	log   *rotator
	cmds  chan cmd
	exits chan exitMsg

	mu      sync.Mutex
	st      Status
	changed chan struct{}
	// runs counts the times the program entered RUNNING, so a waiter that
	// misses a short RUNNING (a program that exits at once) still sees it.
	runs int

	// Owned by loop.
	timer   *time.Timer
	timerC  <-chan time.Time
	backoff int

	// Output pipes being drained, with the goroutines draining them.
	outMu   sync.Mutex
	outs    map[*os.File]struct{}
	outDone sync.WaitGroup
}

func newProc(s *Supervisor, p Program) *proc {
	return &proc{
		s: s, p: p, cmds: make(chan cmd), exits: make(chan exitMsg, 1),
		st:      Status{Name: p.Name, State: Stopped, Priority: p.Priority},
		changed: make(chan struct{}), outs: map[*os.File]struct{}{},
	}
}

func (p *proc) openLog() error {
	if p.p.Log.Path == "" {
		return nil
	}
	r, err := openRotator(p.p.Log)
	p.log = r
	return err
}

func (p *proc) closeLog() {
	if p.log != nil {
		_ = p.log.Close()
	}
}

func (p *proc) status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	if running(st.State) {
		st.Uptime = p.s.opts.Now().Sub(st.Started)
	}
	return st
}

// update changes the snapshot under the lock and wakes waiters.
func (p *proc) update(f func(*Status)) {
	p.mu.Lock()
	from := p.st.State
	f(&p.st)
	if p.st.State == Running && from != Running {
		p.runs++
	}
	ev := Event{Program: p.p.Name, From: from, To: p.st.State, PID: p.st.PID}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	if ev.From != ev.To {
		p.s.opts.Logger.Info("program state", "program", ev.Program, "from", ev.From, "to", ev.To, "pid", ev.PID)
		if p.s.opts.OnEvent != nil {
			p.s.opts.OnEvent(ev)
		}
	}
}

func (p *proc) setState(st State) { p.update(func(s *Status) { s.State = st }) }

// runCount is how many times the program has entered RUNNING.
func (p *proc) runCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}

// wait blocks until until(state) holds or ctx ends.
func (p *proc) wait(ctx context.Context, until func(State) bool) (Status, error) {
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		st := p.status()
		if until(st.State) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// request hands a command to the loop and waits for it to be acted on.
func (p *proc) request(ctx context.Context, k cmdKind) error {
	c := cmd{kind: k, ack: make(chan error, 1)}
	select {
	case p.cmds <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.s.done:
		return ErrClosed
	}
	return <-c.ack
}

func (p *proc) stop(ctx context.Context) error {
	if err := p.request(ctx, cmdStop); err != nil {
		return fmt.Errorf("stopping %s: %w", p.p.Name, err)
	}
	if _, err := p.wait(ctx, func(st State) bool { return !running(st) }); err != nil {
		return fmt.Errorf("stopping %s: %w", p.p.Name, err)
	}
	return nil
}

func (p *proc) loop() {
	for {
		select {
		case c := <-p.cmds:
			c.ack <- p.handle(c.kind)
		case m := <-p.exits:
			p.exited(m)
		case <-p.timerC:
			p.timerC = nil
			p.timeout()
		case <-p.s.done:
			p.clearTimer()
			if st := p.status(); running(st.State) {
				_ = syscall.Kill(-st.PID, syscall.SIGKILL)
			}
			return
		}
	}
}

func (p *proc) handle(k cmdKind) error {
	st := p.status()
	switch {
	case k == cmdStart && running(st.State):
		if st.State == Stopping {
			return fmt.Errorf("%s is stopping", p.p.Name)
		}
		return nil // already started
	case k == cmdStart:
		p.clearTimer()
		p.backoff = 0
		p.spawn(false)
	case k == cmdStop && st.State == Backoff:
		p.clearTimer()
		p.setState(Stopped)
	case k == cmdStop && (st.State == Starting || st.State == Running):
		p.signal(st.PID, p.p.StopSignal)
		p.setState(Stopping)
		p.setTimer(p.p.StopWait)
	}
	return nil
}

// signal sends sig to the program's whole process group.
func (p *proc) signal(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.s.opts.Logger.Warn("signalling program", "program", p.p.Name, "pid", pid, "signal", signalName(sig), "err", err)
	}
}

func (p *proc) timeout() {
	st := p.status()
	switch st.State {
	case Starting:
		p.backoff = 0
		p.setState(Running)
	case Backoff:
		p.spawn(true)
	case Stopping:
		p.s.opts.Logger.Warn("program did not stop in time; killing its process group", "program", p.p.Name, "pid", st.PID, "stopwait", p.p.StopWait)
		p.signal(st.PID, syscall.SIGKILL)
	}
}

func (p *proc) exited(m exitMsg) {
	p.clearTimer()
	exit := Exit{Time: m.time, Code: m.status.ExitStatus()}
	switch {
	case m.lost:
		exit.Code = -1
	case m.status.Signaled():
		exit.Signal = signalName(m.status.Signal())
		exit.Code = 128 + int(m.status.Signal())
	}
	exit.Expected = exit.Signal == "" && slices.Contains(p.p.ExitCodes, exit.Code)
	from := p.status().State
	p.writeLog(fmt.Sprintf("hermes-box-agent: %s (pid %d) %s\n", p.p.Name, m.pid, exit))
	p.update(func(s *Status) { s.PID = 0; s.LastExit = &exit })
	switch from {
	case Stopping:
		p.setState(Stopped)
	case Starting:
		p.startFailed(fmt.Sprintf("exited too quickly (%s)", exit))
	case Running:
		p.setState(Exited)
		if p.p.AutoRestart == RestartAlways || p.p.AutoRestart == RestartUnexpected && !exit.Expected {
			p.spawn(true)
		}
	}
}

// startFailed moves a program that could not start to BACKOFF, or to FATAL
// once its retries are used up.
func (p *proc) startFailed(reason string) {
	p.backoff++
	if p.backoff > p.p.StartRetries {
		p.update(func(s *Status) { s.State = Fatal; s.Error = "gave up: " + reason })
		return
	}
	p.update(func(s *Status) { s.State = Backoff; s.Error = reason })
	p.setTimer(time.Duration(p.backoff) * p.s.opts.BackoffUnit)
}

func (p *proc) setTimer(d time.Duration) {
	p.clearTimer()
	p.timer = time.NewTimer(d)
	p.timerC = p.timer.C
}

func (p *proc) clearTimer() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer, p.timerC = nil, nil
	}
}

// spawn starts one instance. auto marks a restart the supervisor decided.
func (p *proc) spawn(auto bool) {
	pid, err := p.fork()
	if err != nil {
		p.writeLog(fmt.Sprintf("hermes-box-agent: spawn error: %v\n", err))
		p.update(func(s *Status) { s.State = Starting; s.PID = 0 })
		p.startFailed("spawn error: " + err.Error())
		return
	}
	now := p.s.opts.Now()
	p.update(func(s *Status) {
		s.State, s.PID, s.Started, s.Error = Starting, pid, now, ""
		if auto {
			s.Restarts++
		}
	})
	if p.p.StartTime <= 0 {
		p.setState(Running)
		return
	}
	p.setTimer(p.p.StartTime)
}

// fork starts the process in its own process group, with stdin on
// /dev/null and stdout+stderr into a pipe that feeds the log.
func (p *proc) fork() (int, error) {
	path, err := exec.LookPath(p.p.Command[0])
	if err != nil {
		return 0, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	out := null
	var r *os.File
	if p.log != nil {
		var w *os.File
		if r, w, err = os.Pipe(); err != nil {
			return 0, err
		}
		defer w.Close()
		out = w
	}
	env := p.p.Env
	if p.p.EnvFrom != nil {
		extra, err := p.p.EnvFrom()
		if err != nil {
			return 0, err
		}
		env = slices.Concat(env, extra)
	}
	attr := &syscall.ProcAttr{
		Dir:   p.p.Dir,
		Env:   mergeEnv(os.Environ(), env),
		Files: []uintptr{null.Fd(), out.Fd(), out.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if c := p.p.Credential; c != nil {
		attr.Sys.Credential = &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}
	}
	pid, err := p.s.reaper.spawn(func() (int, error) { return syscall.ForkExec(path, p.p.Command, attr) }, p.exits)
	if err != nil {
		if r != nil {
			r.Close()
		}
		return 0, err
	}
	if r != nil {
		p.drain(r)
	}
	return pid, nil
}

// drain copies one instance's output into the log until every holder of
// the pipe's write end has closed it. Write errors do not stop the copy, so
// a full disk never blocks the program.
func (p *proc) drain(r *os.File) {
	p.outMu.Lock()
	p.outs[r] = struct{}{}
	p.outMu.Unlock()
	p.outDone.Add(1)
	go func() {
		defer p.outDone.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				p.writeLog(string(buf[:n]))
			}
			if err != nil {
				break
			}
		}
		p.outMu.Lock()
		delete(p.outs, r)
		p.outMu.Unlock()
		r.Close()
	}()
}

func (p *proc) writeLog(s string) {
	if p.log != nil {
		_, _ = p.log.Write([]byte(s))
	}
}

// drainOutput waits up to d for the output copies to end, then closes the
// pipes that a stray process still holds open.
func (p *proc) drainOutput(d time.Duration) {
	finished := make(chan struct{})
	go func() { p.outDone.Wait(); close(finished) }()
	select {
	case <-finished:
		return
	case <-time.After(d):
	}
	p.outMu.Lock()
	for r := range p.outs {
		r.Close()
	}
	p.outMu.Unlock()
	<-finished
}

// mergeEnv returns base with the "K=V" entries of extra set, later ones
// winning, so no key appears twice.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	index := map[string]int{}
	for _, kv := range slices.Concat(base, extra) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}
