// Package smolvm drives the command line of the supported smolvm releases
// (shared/pins: SmolvmReleases): it builds each argv as those releases
// accept it, parses the JSON of `machine ls --json` and `machine status
// --json`, and turns smolvm's own failures ("Error: …", exit status 1) into
// *Error values. What differs between releases is asked of the release's
// table row (extraction layout, egress floor variable, allow-lists on
// create --from), never of a version string. Calls are serialised within
// the process, because smolvm's state database admits one writer at a time.
//
// Secret values never appear in an argv or a smolvm call at all: smolvm
// drops --secret-env on create --from, so hermes-box delivers them itself.
package smolvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// Cmd is one smolvm invocation.
type Cmd struct {
	// Args are the arguments after the program name.
	Args []string
	// Env holds extra environment variables (KEY=VALUE) on top of the
	// host's environment, e.g. SMOLVM_PACK_CACHE_MAX_BYTES.
	Env []string
	// Stdin, Stdout and Stderr are attached when not nil. A nil Stdout or
	// Stderr is captured into the Result instead.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Result is how a smolvm invocation ended.
type Result struct {
	ExitCode int
	Stdout   []byte // when Cmd.Stdout was nil
	Stderr   []byte // when Cmd.Stderr was nil; the last 64 KiB
}

// Runner runs smolvm. err is set only when the process could not run or
// was killed by ctx; a non-zero exit status is in Result.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Result, error)
}

// ExecRunner runs the smolvm executable as a child process.
type ExecRunner struct {
	// Path is the executable; "" means "smolvm" looked up on PATH.
	Path string
}

// Run implements Runner with exec.CommandContext.
func (r ExecRunner) Run(ctx context.Context, c Cmd) (Result, error) {
	path := r.Path
	if path == "" {
		path = "smolvm"
	}
	cmd := exec.CommandContext(ctx, path, c.Args...)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdin = c.Stdin
	// smolvm's stdout can be a guest's (machine exec): bounded.
	stdout := bounded.NewSink(maxStdout, "the output of smolvm "+verbOf(c.Args))
	stderr := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	if c.Stdout == nil {
		cmd.Stdout = stdout
	}
	if c.Stderr == nil {
		cmd.Stderr = stderr
	}
	// Output copies and the stdin copy must not outlive the process long.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err := stdout.Err(); err != nil {
		return res, fmt.Errorf("running smolvm: %w", err)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, fmt.Errorf("running smolvm: %w", context.Cause(ctx))
	case errors.As(err, &ee) && ee.Exited():
		res.ExitCode = ee.ExitCode()
		return res, nil
	case errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = cmd.ProcessState.ExitCode()
		return res, nil
	}
	return res, fmt.Errorf("running smolvm: %w", err)
}

// maxStdout bounds the captured stdout of one smolvm call.
const maxStdout = 16 << 20

// verbOf names a call by its first two arguments ("machine exec").
func verbOf(args []string) string {
	if len(args) > 2 {
		args = args[:2]
	}
	return strings.Join(args, " ")
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf }
