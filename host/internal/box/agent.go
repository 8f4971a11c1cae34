package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// Call runs one agent verb over tr: the request carries argv and says
// whether stdin (which may be nil) follows it, the verb's data goes to
// stdout (nil discards it) and its events to onEvent (nil drops them). A
// non-zero exit status is returned as an *ExitError. It is the one way
// hermes-box runs an agent verb.
func Call(ctx context.Context, tr relay.Transport, onEvent func(protocol.Event), argv []string, stdin io.Reader, stdout io.Writer) error {
	req := protocol.Request{ProtocolVersion: protocol.Version, Argv: argv, Options: protocol.Options{Stdin: stdin != nil}}
	if stdout == nil {
		stdout = io.Discard
	}
	if onEvent != nil {
		onEvent = (&eventBudget{emit: onEvent, steps: map[string]bool{}}).event
	}
	cause := &agentCause{emit: onEvent}
	code, err := tr.Run(ctx, req, stdin, stdout, cause.event)
	if err != nil || code == 0 {
		cause.release()
		return err
	}
	return &ExitError{Argv: argv, Code: code, Message: cause.message()}
}

// maxCause bounds the agent's error message an ExitError carries.
const maxCause = 4 << 10

// agentCause holds back the agent's error event (its final error, which
// the agent prints as it exits) so that a verb that fails reports it once,
// as the host's final error, rather than as a relayed line and again as
// "exited with status N". The message of the last failed step is the
// cause when no error event came; the failed step's event carries it in
// its fields instead of its message.
type agentCause struct {
	emit       func(protocol.Event)
	held       *protocol.Event // the latest error event, not yet passed on
	failedStep string
}

func (c *agentCause) event(ev protocol.Event) {
	switch {
	case ev.Type == protocol.EventLog && ev.Level == protocol.LevelError && ev.Step == "":
		c.pass(c.held) // an earlier error was not the last: show it
		c.held = &ev
		return
	case ev.Type == protocol.EventStep && ev.State == protocol.StepFailed && ev.Message != "":
		// The reason moves to the event's fields (JSON keeps it; text
		// shows the step failed) and into the verb's exit error.
		c.failedStep = ev.Step + ": " + ev.Message
		ev.Fields = maps.Clone(ev.Fields)
		if ev.Fields == nil {
			ev.Fields = map[string]string{}
		}
		ev.Fields["error"], ev.Message = ev.Message, ""
	}
	c.pass(&ev)
}

func (c *agentCause) pass(ev *protocol.Event) {
	if ev != nil && c.emit != nil {
		c.emit(*ev)
	}
}

// release passes on the held event: the verb did not fail after all.
func (c *agentCause) release() {
	c.pass(c.held)
	c.held = nil
}

// message is the agent's account of its failure, made safe to show.
func (c *agentCause) message() string {
	msg := c.failedStep
	if c.held != nil {
		msg = c.held.Message
	}
	if len(msg) > maxCause {
		msg = msg[:maxCause] + "…"
	}
	return termsafe.Text(strings.TrimSpace(msg))
}

// Per call, the events of the box passed on: at most maxEventSteps step
// names, maxLogEvents other events and maxEventText bytes of messages. A box
// that invents step names or repeats warnings cannot fill the terminal or
// the host's memory.
const (
	maxEventSteps = 256
	maxLogEvents  = 1000
	maxEventText  = 512 << 10
)

// eventBudget passes a call's events on within the limits, and says once
// that it dropped some.
type eventBudget struct {
	emit    func(protocol.Event)
	steps   map[string]bool
	logs    int
	text    int
	dropped bool
}

func (e *eventBudget) event(ev protocol.Event) {
	ok := true
	switch {
	case ev.Step != "":
		if !e.steps[ev.Step] {
			ok = len(e.steps) < maxEventSteps
			if ok {
				e.steps[ev.Step] = true
			}
		}
	default:
		e.logs++
		ok = e.logs <= maxLogEvents
	}
	e.text += min(len(ev.Message), termsafe.MaxLine)
	if e.text > maxEventText {
		ok = false
	}
	if ok {
		e.emit(ev)
		return
	}
	if !e.dropped {
		e.dropped = true
		e.emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
			Message: fmt.Sprintf("the box sent more than %d step names, %d messages or %d KiB of text in one call; the rest are dropped",
				maxEventSteps, maxLogEvents, maxEventText>>10)})
	}
}

// ExitError is an agent verb that exited non-zero; hermes-box exits with
// the same status.
type ExitError struct {
	Argv []string
	Code int
	// Message is the agent's own error (its error event, or its failed
	// step's message), made safe to show; "" when it gave none.
	Message string
}

func (e *ExitError) Error() string {
	verb := "request"
	if len(e.Argv) > 0 {
		verb = e.Argv[0]
	}
	if e.Message != "" {
		return fmt.Sprintf("%s (agent %s exited with status %d)", e.Message, verb, e.Code)
	}
	return fmt.Sprintf("agent %s exited with status %d", verb, e.Code)
}

// ExitCode is the verb's exit status.
func (e *ExitError) ExitCode() int { return e.Code }

// call runs an agent verb over tr and renders its events on the box's UI.
func (b *Box) call(ctx context.Context, tr relay.Transport, argv []string, stdin io.Reader, stdout io.Writer) error {
	return Call(ctx, tr, b.ui.Event, argv, stdin, stdout)
}

// RunAgent runs an agent verb in the box over the SSH relay with the
// pinned host key; its events are rendered on the box's UI.
func (b *Box) RunAgent(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	tr, err := b.sshRelay()
	if err != nil {
		return err
	}
	return b.call(ctx, tr, argv, stdin, stdout)
}

// Relay is the SSH transport to the box once it runs; a box that does not
// run is refused, saying what for.
func (b *Box) Relay(ctx context.Context, purpose string) (relay.Transport, error) {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	if m.State != smolvm.StateRunning {
		return nil, fmt.Errorf("%s is %s: %s (hermes-box start)", m.Name, m.State, purpose)
	}
	return b.sshRelay()
}

// sshRelay is the SSH transport to the runtime box, with the pinned host key.
func (b *Box) sshRelay() (*relay.SSH, error) {
	return b.sshRelayTo(b.cfg.MachineName, b.cfg.SSHPort)
}

// sshRelayTo is the SSH transport to machine name on loopback port, with
// the host key pinned for that machine.
func (b *Box) sshRelayTo(name string, port int) (*relay.SSH, error) {
	keyPath := b.cfg.SSHKeyPath()
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		return nil, userr.NotInitialised("no project SSH key at " + keyPath)
	} else if err != nil {
		return nil, fmt.Errorf("project SSH key %s: %w", keyPath, err)
	}
	signer, err := keys.EnsureProjectKey(keyPath, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	hostKey, err := keys.LoadHostKey(b.cfg.StateDir(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no pinned host key for %s (it is pinned by hermes-box init): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return &relay.SSH{Addr: addr, User: b.sshUser, Signer: signer, HostKey: hostKey,
		Command: b.relayCmd, DialTimeout: b.timing.callTimeout}, nil
}

// execRelay is the smolvm-exec transport to a machine.
func (b *Box) execRelay(machine string) *relay.Exec {
	return &relay.Exec{Machine: machine, Execer: b.vm}
}

// maxVerbResult bounds the answer of a verb the host reads whole (health,
// services status, executor status).
const maxVerbResult = 1 << 20

// health asks the agent for its report (the cheap checks, as status shows).
func (b *Box) health(ctx context.Context, tr relay.Transport) (*health.Report, error) {
	return b.healthReport(ctx, tr, false)
}

// healthReport asks the agent for its report; deep also runs the
// installed tools (hermes, the messaging extra, node, npm, tmux, codex).
func (b *Box) healthReport(ctx context.Context, tr relay.Transport, deep bool) (*health.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
	defer cancel()
	out := bounded.NewBuffer(maxVerbResult, "the agent's health report")
	argv := []string{"health", "--json"}
	if deep {
		argv = append(argv, "--deep")
	}
	if err := b.call(ctx, tr, argv, nil, out); err != nil {
		return nil, err
	}
	return health.Decode(out.Bytes())
}

// tail is the last line or so of a command's stderr, for error messages.
func tail(b []byte) string {
	const max = 400
	s := string(b)
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	if s == "" {
		return "no output"
	}
	return s
}
