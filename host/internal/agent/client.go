// Package agent is the host's one door to hermes-box-agent's verbs in the
// box: every call of a verb goes through a Client, and every verb is
// declared once in Verbs with the most bytes its stdout and stderr may
// carry and its deadline. A call applies them by construction: an answer
// past its cap or its deadline ends the call with an error that names the
// verb and what to run next, and the box's events reach the caller only
// within a budget (eventBudget) and made safe to show.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Client calls agent verbs over one transport (the SSH relay, or smolvm
// exec while the box has no sshd).
type Client struct {
	dial    func() (relay.Transport, error)
	onEvent func(protocol.Event)
	// shorten, in this package's tests only, caps every deadline.
	shorten time.Duration
}

// New is a client over tr whose calls pass the box's events to onEvent
// (nil drops them).
func New(tr relay.Transport, onEvent func(protocol.Event)) *Client {
	return &Client{dial: func() (relay.Transport, error) { return tr, nil }, onEvent: onEvent}
}

// Dialled is a client that gets its transport from dial at each call, so
// that a box that is not reachable fails the call, not the client's making.
func Dialled(dial func() (relay.Transport, error), onEvent func(protocol.Event)) *Client {
	return &Client{dial: dial, onEvent: onEvent}
}

// NextStep is what a command whose box did not answer says to run next.
const NextStep = "hermes-box restart; to look inside the box first, hermes-box shell"

// The causes of a call's context when its verb's deadline passed, or its
// idle deadline passed with no sign of progress.
var (
	errDeadline = errors.New("deadline of the verb")
	errIdle     = errors.New("idle deadline of the verb")
)

// Call runs verb v with args appended to its words. stdin (nil when the
// verb takes none) follows the request line; the verb's data goes to
// stdout (nil discards it) within its cap. A non-zero exit status is an
// *ExitError; a box that does not answer within the verb's deadline, or
// shows no progress within its idle deadline, is an error naming the verb,
// with the next step to run.
func (c *Client) Call(ctx context.Context, v *Verb, args []string, stdin io.Reader, stdout io.Writer) error {
	if (stdin != nil) != v.Stdin {
		return fmt.Errorf("agent %s: input given %t, the verb takes input %t", v.Name(), stdin != nil, v.Stdin)
	}
	tr, err := c.dial()
	if err != nil {
		return err
	}
	argv := append(slices.Clip(v.Argv), args...)
	total, idle := c.deadlines(v)
	if total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, total, errDeadline)
		defer cancel()
	}
	ctx, watch := watchIdle(ctx, idle)
	defer watch.stop()
	if stdin != nil {
		stdin = &progressReader{r: stdin, watch: watch}
	}
	if stdout == nil {
		stdout = io.Discard
	}
	out := &capped{w: stdout, max: v.Stdout, what: "the answer of agent " + v.Name(), watch: watch}
	ctx = relay.WithStderrLimit(ctx, stderrWhat(v), v.Stderr)
	cause := &agentCause{emit: (&eventBudget{emit: c.onEvent, steps: map[string]bool{}}).event}
	req := protocol.Request{ProtocolVersion: protocol.Version, Argv: argv, Options: protocol.Options{Stdin: stdin != nil}}
	code, err := tr.Run(ctx, req, stdin, out, func(ev protocol.Event) {
		watch.progress()
		if ev, ok := sanitise(ev); ok {
			cause.event(ev)
		}
	})
	if cerr := callError(ctx, v, total, idle, out.err); cerr != nil {
		return &NoAnswerError{Verb: v.Name(), Err: cerr, Late: out.err == nil}
	}
	if lim := (*bounded.LimitError)(nil); errors.As(err, &lim) && lim.What == stderrWhat(v) {
		return &NoAnswerError{Verb: v.Name(), Err: err}
	}
	if err != nil || code == 0 {
		cause.release()
		return err
	}
	return &ExitError{Argv: argv, Code: code, Message: cause.message()}
}

// stderrWhat is what a cap error calls the stderr of v.
func stderrWhat(v *Verb) string { return "the events (stderr) of agent " + v.Name() }

// NoAnswerError is a call the box did not answer as its verb says: the
// verb's deadline or idle deadline passed (Late), or its answer broke the
// verb's cap on stdout or stderr, or the protocol (an answer that does not
// decode). A box still booting refuses or drops the connection instead;
// this is a box that took the call and then hung or turned hostile.
type NoAnswerError struct {
	Verb string
	Err  error
	Late bool
}

func (e *NoAnswerError) Error() string { return e.Err.Error() }
func (e *NoAnswerError) Unwrap() error { return e.Err }

// Unanswered is the error that ends a wait once the box did not answer n
// calls in a row, last the last of them: it names the verb and what to
// run next.
func Unanswered(n int, last *NoAnswerError) error {
	if last.Late {
		return userr.WithHint(fmt.Errorf("%w, %d calls in a row", last, n), NextStep)
	}
	return userr.WithHint(fmt.Errorf("the box did not answer agent %s, %d calls in a row: %w", last.Verb, n, last), NextStep)
}

// callError is the error of a call that a deadline or its stdout cap ended.
func callError(ctx context.Context, v *Verb, total, idle time.Duration, outErr error) error {
	switch cause := context.Cause(ctx); {
	case outErr != nil:
		return outErr
	case errors.Is(cause, errDeadline):
		return userr.WithHint(fmt.Errorf("the box did not answer agent %s within %v", v.Name(), total), NextStep)
	case errors.Is(cause, errIdle):
		return userr.WithHint(fmt.Errorf("the box did not answer agent %s: no progress for %v (a working box reports progress every %v)",
			v.Name(), idle, protocol.HeartbeatEvery), NextStep)
	}
	return nil
}

// deadlines are v's deadline and idle deadline (0: none); tests may
// shorten them (shorten caps a deadline, and an idle deadline at half).
func (c *Client) deadlines(v *Verb) (total, idle time.Duration) {
	total, idle = v.Deadline, v.Idle
	if c.shorten > 0 {
		total, idle = min(total, c.shorten), min(idle, c.shorten/2)
	}
	return total, idle
}

// idleWatch ends a call's context with errIdle when no progress was seen
// for its idle deadline; a nil *idleWatch (no idle deadline) does nothing.
type idleWatch struct {
	mu    sync.Mutex
	timer *time.Timer
	idle  time.Duration
}

func watchIdle(ctx context.Context, idle time.Duration) (context.Context, *idleWatch) {
	if idle <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, &idleWatch{idle: idle, timer: time.AfterFunc(idle, func() { cancel(errIdle) })}
}

// progress restarts the idle deadline: the box sent or took bytes.
func (w *idleWatch) progress() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.timer.Reset(w.idle)
	w.mu.Unlock()
}

func (w *idleWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.timer.Stop()
	w.mu.Unlock()
}

// progressReader is a call's input: each read the box takes is progress.
type progressReader struct {
	r     io.Reader
	watch *idleWatch
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.watch.progress()
	}
	return n, err
}

// capped passes at most max bytes on to w (no cap when max is 0); the
// write that would pass the cap fails the call.
type capped struct {
	w     io.Writer
	max   int64
	n     int64
	what  string
	err   error
	watch *idleWatch
}

func (c *capped) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.watch.progress()
	if c.max > 0 && c.n+int64(len(p)) > c.max {
		c.err = &bounded.LimitError{What: c.what, Limit: c.max}
		return 0, c.err
	}
	c.n += int64(len(p))
	return c.w.Write(p)
}
