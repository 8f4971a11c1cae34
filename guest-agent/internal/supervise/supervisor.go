package supervise

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Options tune a Supervisor; the zero value is usable.
type Options struct {
	// ReapOrphans makes the supervisor reap every child of this process,
	// not only its programs: set it when the process is a subreaper or
	// PID 1, and never when other code in the process waits for children.
	ReapOrphans bool
	// BackoffUnit is the delay before the first retry of a program that
	// failed to start; the n-th retry waits n units. Default one second.
	BackoffUnit time.Duration
	// Logger receives the supervisor's own events. Default: discarded.
	Logger *slog.Logger
	// OnEvent, if set, is called after every state change, from the
	// program's goroutine; it must not block.
	OnEvent func(Event)
	// Now is the clock; time.Now by default.
	Now func() time.Time
}

// Event is a state change of one program.
type Event struct {
	Program string
	From    State
	To      State
	PID     int
}

// Errors callers may branch on.
var (
	ErrUnknownProgram = errors.New("no such program")
	ErrClosed         = errors.New("supervisor closed")
)

// Supervisor runs a fixed table of programs.
type Supervisor struct {
	opts   Options
	procs  map[string]*proc
	order  []*proc // ascending priority, then name
	reaper *reaper
	done   chan struct{}
	loops  sync.WaitGroup
	closed sync.Once
}

// New validates the programs, opens their logs and starts supervising;
// nothing is started until StartAutostart or Start.
func New(programs []Program, o Options) (*Supervisor, error) {
	if o.BackoffUnit <= 0 {
		o.BackoffUnit = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Supervisor{opts: o, procs: map[string]*proc{}, done: make(chan struct{})}
	var errs []error
	for _, p := range programs {
		p = p.withDefaults()
		if err := p.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := s.procs[p.Name]; dup {
			errs = append(errs, fmt.Errorf("program %q: name: defined twice", p.Name))
			continue
		}
		s.procs[p.Name] = newProc(s, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, p := range s.procs {
		if err := p.openLog(); err != nil {
			s.closeLogs()
			return nil, fmt.Errorf("program %q: %w", p.p.Name, err)
		}
		s.order = append(s.order, p)
	}
	slices.SortFunc(s.order, func(a, b *proc) int {
		return cmp.Or(cmp.Compare(a.p.Priority, b.p.Priority), cmp.Compare(a.p.Name, b.p.Name))
	})
	s.reaper = newReaper(o.ReapOrphans, func(pid int, ws syscall.WaitStatus) {
		s.opts.Logger.Info("reaped orphan", "pid", pid, "status", describe(ws))
	})
	for _, p := range s.order {
		s.loops.Add(1)
		go func() { defer s.loops.Done(); p.loop() }()
	}
	return s, nil
}

func (s *Supervisor) closeLogs() {
	for _, p := range s.procs {
		p.closeLog()
	}
}

func (s *Supervisor) proc(name string) (*proc, error) {
	p, ok := s.procs[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownProgram, name)
	}
	return p, nil
}

// Program returns the program table entry for name.
func (s *Supervisor) Program(name string) (Program, bool) {
	p, ok := s.procs[name]
	if !ok {
		return Program{}, false
	}
	return p.p, true
}

// Status returns every program's status in priority order.
func (s *Supervisor) Status() []Status {
	out := make([]Status, 0, len(s.order))
	for _, p := range s.order {
		out = append(out, p.status())
	}
	return out
}

// StartAutostart spawns the autostart programs in ascending priority
// without waiting for them to reach RUNNING.
func (s *Supervisor) StartAutostart(ctx context.Context) error {
	var errs []error
	for _, p := range s.order {
		if p.p.AutoStart {
			errs = append(errs, p.request(ctx, cmdStart))
		}
	}
	return errors.Join(errs...)
}

// Start starts a program and waits until it is RUNNING or has failed.
func (s *Supervisor) Start(ctx context.Context, name string) error {
	p, err := s.proc(name)
	if err != nil {
		return err
	}
	before := p.runCount()
	if err := p.request(ctx, cmdStart); err != nil {
		return err
	}
	// Started means it reached RUNNING, even if it has exited since (a
	// program with startsecs 0 that ends at once may be EXITED, or already
	// STARTING again, by the time this looks).
	started := func() bool { return p.runCount() > before }
	st, err := p.wait(ctx, func(st State) bool { return st != Starting && st != Backoff || started() })
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	if st.State != Running && !started() {
		return fmt.Errorf("starting %s: %s (%s)", name, st.State, st.Description())
	}
	return nil
}

// Stop stops a program (its whole process group) and waits until it is.
func (s *Supervisor) Stop(ctx context.Context, name string) error {
	p, err := s.proc(name)
	if err != nil {
		return err
	}
	return p.stop(ctx)
}

// Restart stops a program, then starts it.
func (s *Supervisor) Restart(ctx context.Context, name string) error {
	if err := s.Stop(ctx, name); err != nil {
		return err
	}
	return s.Start(ctx, name)
}

// StartAll starts every program in ascending priority, each waited for.
func (s *Supervisor) StartAll(ctx context.Context) error {
	var errs []error
	for _, p := range s.order {
		errs = append(errs, s.Start(ctx, p.p.Name))
	}
	return errors.Join(errs...)
}

// StopAll stops every program in descending priority, each waited for.
func (s *Supervisor) StopAll(ctx context.Context) error {
	var errs []error
	for _, p := range slices.Backward(s.order) {
		errs = append(errs, p.stop(ctx))
	}
	return errors.Join(errs...)
}

// Close stops every program (bounded by their stop waits), ends the
// supervisor's goroutines and closes the logs. It is safe to call twice.
func (s *Supervisor) Close() error {
	var err error
	s.closed.Do(func() {
		var longest time.Duration
		for _, p := range s.order {
			longest = max(longest, p.p.StopWait)
		}
		ctx, cancel := context.WithTimeout(context.Background(), longest+5*time.Second)
		err = s.StopAll(ctx)
		cancel()
		close(s.done)
		s.loops.Wait()
		for _, p := range s.order {
			p.drainOutput(time.Second)
		}
		s.reaper.close()
		s.closeLogs()
	})
	return err
}

// describe renders a wait status for logs.
func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by SIG" + signalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}
