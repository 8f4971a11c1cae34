// Package userr is how host errors reach the person at the terminal: an
// error may carry the next step to run (a hint) and the process exit
// status it stands for. The command line prints an error once, with one
// prefix, and its hint; under --log-format json both are one event.
package userr

import (
	"errors"
	"fmt"
)

// The exit statuses of hermes-box (README "Exit codes"; `hermes-box help
// exit-codes`).
const (
	ExitOK          = 0
	ExitFailure     = 1   // the command failed; status: the box is unhealthy
	ExitUsage       = 2   // bad usage: unknown command, flag or argument
	ExitStopped     = 3   // status: the box is stopped
	ExitNoBox       = 4   // status: there is no box; other commands: run init first
	ExitInterrupted = 130 // Ctrl-C (SIGINT) or SIGTERM
)

// Error is an error with a next step and an exit status.
type Error struct {
	Err  error
	Next string // what to run next, or ""
	Code int    // the exit status; 0 means ExitFailure
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// WithHint adds a next step to err (nil stays nil).
func WithHint(err error, next string) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err, Next: next}
}

// WithCode gives err an exit status (nil stays nil).
func WithCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err, Code: code}
}

// Usage is a bad invocation (exit status 2).
func Usage(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...), Code: ExitUsage}
}

// ErrNoBox is wrapped by errors that mean nothing was initialised yet.
var ErrNoBox = errors.New("there is no box yet")

// NotInitialised is the error of a command that needs the box before init:
// it says to run init first.
func NotInitialised(detail string) error {
	return &Error{Err: fmt.Errorf("%w (%s)", ErrNoBox, detail), Code: ExitNoBox,
		Next: "run hermes-box init first (or hermes-box restore BACKUP)"}
}

// Hint is the next step err carries (the outermost one), or "".
func Hint(err error) string {
	var e *Error
	for err != nil {
		if !errors.As(err, &e) {
			return ""
		}
		if e.Next != "" {
			return e.Next
		}
		err = e.Err
	}
	return ""
}

// Code is the exit status err carries: the outermost non-zero Code, else
// the status of an error with an ExitCode method (an agent verb's), else
// ExitFailure.
func Code(err error) int {
	var e *Error
	for rest := err; rest != nil; rest = e.Err {
		if !errors.As(rest, &e) {
			break
		}
		if e.Code != 0 {
			return e.Code
		}
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) && ec.ExitCode() > 0 {
		return ec.ExitCode()
	}
	return ExitFailure
}
