package smolvm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Exit statuses smolvm 1.0.4 uses.
const (
	ExitError   = 1   // smolvm's own error, "Error: …" on stderr
	ExitUsage   = 2   // the command line was refused (clap)
	ExitTimeout = 124 // exec --timeout expired
)

// ErrNotFound is wrapped by errors about a machine that does not exist.
var ErrNotFound = errors.New("machine not found")

// ErrTimeout is wrapped when an exec's --timeout expired (status 124).
var ErrTimeout = errors.New("timed out")

// ErrBootTimeout is wrapped when a machine missed smolvm's fixed boot
// wait: smolvm waits 30 s for the guest's agent and then fails the call
// with "agent did not become ready within 30 seconds" (AGENT_READY_TIMEOUT
// and wait_for_ready in src/agent/manager.rs, 1.0.4 and 1.9.3).
var ErrBootTimeout = errors.New("the machine missed smolvm's boot wait")

// bootTimeoutText is smolvm's message for ErrBootTimeout.
const bootTimeoutText = "agent did not become ready within"

// Error is a smolvm invocation that failed.
type Error struct {
	// Op is the subcommand, e.g. "machine create".
	Op string
	// Machine is the machine the call was about, if any.
	Machine string
	// ExitCode is smolvm's exit status.
	ExitCode int
	// Message is smolvm's "Error: …" text (or clap's "error: …", or the
	// tail of stderr when neither is there).
	Message string
}

func (e *Error) Error() string {
	target := ""
	if e.Machine != "" {
		target = " " + e.Machine
	}
	msg := e.Message
	if msg == "" {
		msg = "no error message"
	}
	return fmt.Sprintf("smolvm %s%s: %s (exit status %d)", e.Op, target, msg, e.ExitCode)
}

// Unwrap lets errors.Is find ErrNotFound, ErrTimeout and ErrBootTimeout.
func (e *Error) Unwrap() error {
	switch {
	case e.ExitCode == ExitTimeout:
		return ErrTimeout
	case strings.Contains(e.Message, bootTimeoutText):
		return ErrBootTimeout
	case strings.Contains(e.Message, "not found"):
		return ErrNotFound
	}
	return nil
}

// newError builds the error for a failed call from its stderr.
func newError(op, machine string, res Result) *Error {
	return &Error{Op: op, Machine: machine, ExitCode: res.ExitCode, Message: errorMessage(res.Stderr)}
}

// errorMessage finds smolvm's "Error: " line (or clap's "error: "), else
// the last non-empty line of stderr.
func errorMessage(stderr []byte) string {
	lines := bytes.Split(bytes.TrimSpace(stderr), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(string(lines[i]))
		for _, prefix := range []string{"Error: ", "error: "} {
			if msg, ok := strings.CutPrefix(line, prefix); ok {
				return msg
			}
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if line := strings.TrimSpace(string(lines[i])); line != "" {
			return line
		}
	}
	return ""
}
