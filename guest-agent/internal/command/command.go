// Package command is the agent's one way to run a program: no shell, a
// timeout on every command, the process group terminated at the deadline,
// the tail of each stream kept, and one environment policy — a fixed base
// (PATH, HOME=/root, a UTF-8 C locale) plus the entries the caller names;
// nothing else of the agent's own environment reaches the child. Provision,
// the approval gate (patch, probe) and the OCI helper's release validation
// use it.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Command is one program to run. It is never parsed by a
// shell: Path is executed with Args as they are.
type Command struct {
	Path string
	Args []string
	// Env is added to the runner's fixed base environment.
	Env []string
	// Dir is the working directory; empty means the runner's.
	Dir string
	// Timeout bounds the command; a runner refuses a command without one.
	Timeout time.Duration
	// Credential, when set, runs the command as that user.
	Credential *syscall.Credential
}

// String is the command line for messages (no secret ever travels in argv).
func (c Command) String() string {
	return strings.TrimSpace(c.Path + " " + strings.Join(c.Args, " "))
}

// Output is what a finished command printed (each stream's tail).
type Output struct {
	Stdout []byte
	Stderr []byte
}

// Runner runs commands; the real one starts processes, tests record them.
type Runner interface {
	Run(ctx context.Context, c Command) (Output, error)
}

// CommandError is a command that failed, with the tail of its stderr.
type CommandError struct {
	Command  string
	ExitCode int
	TimedOut bool
	Timeout  time.Duration
	Stderr   string
	Err      error
}

func (e *CommandError) Error() string {
	var what string
	switch {
	case e.TimedOut:
		what = fmt.Sprintf("timed out after %s", e.Timeout)
	case e.ExitCode >= 0:
		what = fmt.Sprintf("exited with status %d", e.ExitCode)
	default:
		what = e.Err.Error()
	}
	msg := fmt.Sprintf("%s: %s", e.Command, what)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// tailBytes is how much of each stream a command keeps.
const tailBytes = 4 << 10

// basePath is the PATH every command runs with.
const basePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ExecRunner runs commands as child processes in their own process group.
// At the timeout the group gets SIGTERM, and KillAfter later the process is
// killed (the reference's `timeout --signal=TERM --kill-after=30s`).
type ExecRunner struct {
	// KillAfter is the grace between SIGTERM and SIGKILL (default 30s).
	KillAfter time.Duration
}

// Run starts c and waits for it.
func (r ExecRunner) Run(ctx context.Context, c Command) (Output, error) {
	if c.Timeout <= 0 {
		return Output{}, fmt.Errorf("running %s: no timeout set", c)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append([]string{basePath, "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}, c.Env...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.Credential}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = r.KillAfter
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 30 * time.Second
	}
	stdout, stderr := &tail{max: tailBytes}, &tail{max: tailBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err == nil {
		return out, nil
	}
	ce := &CommandError{Command: c.String(), ExitCode: -1, Stderr: string(out.Stderr), Err: err, Timeout: c.Timeout}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ce.ExitCode = ee.ExitCode()
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		ce.TimedOut = true
	}
	return out, ce
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf.Reset()
		p = p[len(p)-t.max:]
	} else if over := t.buf.Len() + len(p) - t.max; over > 0 {
		t.buf.Next(over)
	}
	t.buf.Write(p)
	return n, nil
}

func (t *tail) Bytes() []byte { return bytes.Clone(t.buf.Bytes()) }
