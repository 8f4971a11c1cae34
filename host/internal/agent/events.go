package agent

import (
	"fmt"
	"maps"
	"strings"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

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
		ev.Fields[protocol.FieldError], ev.Message = ev.Message, ""
	}
	c.pass(&ev)
}

func (c *agentCause) pass(ev *protocol.Event) {
	if ev != nil {
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
	emit    func(protocol.Event) // nil drops every event
	steps   map[string]bool
	logs    int
	text    int
	dropped bool
}

func (e *eventBudget) event(ev protocol.Event) {
	if e.emit == nil {
		return
	}
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
