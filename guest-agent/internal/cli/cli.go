// Package cli is the agent's command line: one table of verbs (verbs.go) parsed
// with the standard flag package, so the static binary stays lean. The same
// table serves the relay, which dispatches an allow-listed subset in-process.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Stdio is the three standard streams of one invocation.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// env is what every verb receives.
type env struct {
	Stdio
	// root is the file system root the agent works on; "/" in the box,
	// a temp dir in tests.
	root string
	// events reports progress and logs as protocol events on stderr.
	events *protocol.EventWriter
	log    *slog.Logger
	// relayed is set when the host's relay dispatched the verb.
	relayed bool
}

// verb is one agent command.
type verb struct {
	name    string
	summary string
	// relay marks verbs the host may call through the relay; only the
	// table in verbs.go sets it.
	relay bool
	run   func(ctx context.Context, e *env, args []string) error
}

// exitError carries a specific exit status out of a verb.
type exitError struct {
	code int
	err  error
	// quiet says the status was already reported (by a child process).
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a bad invocation; it exits 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// Run parses args and runs one verb, returning the process exit status.
func Run(ctx context.Context, args []string, stdio Stdio) int {
	return RunAs(ctx, "hermes-box-agent", args, stdio)
}

// RunAs is Run for the binary invoked under name (argv[0]'s base name):
// as supervisorctl, the agent is its supervisorctl verb.
func RunAs(ctx context.Context, name string, args []string, stdio Stdio) int {
	if name == SupervisorctlName {
		args = append([]string{SupervisorctlName}, args...)
	}
	fs := flag.NewFlagSet("hermes-box-agent", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	root := fs.String("root", "/", "file system root to work on (tests)")
	fs.Usage = func() { printUsage(stdio.Err) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	e := &env{Stdio: stdio, root: *root}
	e.events = protocol.NewEventWriter(stdio.Err, protocol.LevelInfo)
	e.log = slog.New(slog.NewTextHandler(stdio.Err, nil))
	return exitCode(e, dispatch(ctx, e, fs.Args(), false))
}

// dispatch runs argv[0] with the rest as its arguments. From the relay only
// verbs marked relay are allowed.
func dispatch(ctx context.Context, e *env, argv []string, fromRelay bool) error {
	if len(argv) == 0 {
		printUsage(e.Err)
		return usageError("no verb given")
	}
	v, ok := lookup(argv[0])
	if !ok || (fromRelay && !v.relay) {
		if fromRelay {
			return usageError("verb %q is not allowed through the relay", argv[0])
		}
		return usageError("unknown verb %q (see hermes-box-agent -h)", argv[0])
	}
	err := v.run(ctx, e, argv[1:])
	if len(argv) > 1 && isHelpFlag(argv[1]) {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == 2 {
			// A verb with subcommands: its summary is its help.
			fmt.Fprintf(e.Err, "usage: hermes-box-agent %s ...\n  %s\n", v.name, v.summary)
			return nil
		}
	}
	return err
}

// isHelpFlag reports -h, -help and --help.
func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// errHelp ends a verb whose help was asked for: status 0, nothing more to
// report (the usage is printed).
var errHelp = &exitError{code: 0, err: flag.ErrHelp, quiet: true}

// exitCode reports err once on stderr and maps it to a status. A quiet
// exit status (a child that already reported) adds nothing.
func exitCode(e *env, err error) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	var coded interface{ ExitCode() int }
	switch {
	case errors.As(err, &ee):
		code = ee.code
		if ee.quiet {
			return code
		}
	case errors.As(err, &coded):
		code = coded.ExitCode()
	}
	_ = e.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelError, Message: err.Error()})
	return code
}

// writeJSON writes v as indented JSON, the verbs' data format on stdout.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: hermes-box-agent [--root DIR] VERB [ARGS]")
	for _, v := range Verbs() {
		fmt.Fprintf(w, "  %-13s %s\n", v.name, v.summary)
	}
}

// newFlags returns a flag set for a verb that writes usage to stderr.
func newFlags(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Err)
	fs.Usage = func() {
		fmt.Fprintf(e.Err, "usage: hermes-box-agent %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses verb flags and turns failures into usage errors.
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError("%s: %w", fs.Name(), err)
	}
	if fs.NArg() > maxArgs {
		return usageError("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args()[maxArgs:], " "))
	}
	return nil
}
