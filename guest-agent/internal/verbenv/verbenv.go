// Package verbenv is what an agent verb implemented outside package cli
// receives and returns: the Executor helper's in-process executor verb
// lives in its own package so the lean agent links none of its imports.
package verbenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Env is one invocation of a verb.
type Env struct {
	// Root is the file system root the agent works on ("/" in the box).
	Root string
	// Relayed is set when the host's relay dispatched the verb.
	Relayed bool
	Events  *protocol.EventWriter
	Log     *slog.Logger
	In      io.Reader
	Out     io.Writer
	Err     io.Writer
}

// Func runs a verb with its arguments.
type Func func(ctx context.Context, e Env, args []string) error

// UsageError is a bad invocation: the agent exits 2.
type UsageError struct{ Err error }

func (u *UsageError) Error() string { return u.Err.Error() }
func (u *UsageError) Unwrap() error { return u.Err }

// ExitCode is the agent's exit status for a usage error.
func (u *UsageError) ExitCode() int { return 2 }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error { return &UsageError{Err: fmt.Errorf(format, args...)} }
