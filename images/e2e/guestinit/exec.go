//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// timeoutExit is smolvm's exit code for an exec that hit --timeout.
const timeoutExit = 124

// frameWriter turns writes into Stdout or Stderr frames.
type frameWriter struct {
	p *port
	s *session
	t wire.Type
}

func (w frameWriter) Write(b []byte) (int, error) {
	for off := 0; off < len(b); off += wire.Chunk {
		end := min(off+wire.Chunk, len(b))
		w.p.send(w.s, w.t, b[off:end])
	}
	return len(b), nil
}

// exec runs a command in its own process group, forwards stdin frames to
// it and its output as frames, and ends with its exit status. The group is
// killed on --timeout (exit 124) and when the host goes away.
func (p *port) exec(s *session, payload []byte) {
	var req wire.ExecRequest
	if err := json.Unmarshal(payload, &req); err != nil || len(req.Argv) == 0 {
		p.fail(s, fmt.Errorf("bad exec request: %v", err))
		return
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	cmd.Dir = req.Dir
	cmd.Stdout = frameWriter{p, s, wire.Stdout}
	cmd.Stderr = frameWriter{p, s, wire.Stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // a daemon keeping our pipes open must not hold the exit
	stdin, err := cmd.StdinPipe()
	if err != nil {
		p.fail(s, err)
		return
	}
	if err := cmd.Start(); err != nil {
		msg := fmt.Sprintf("%v\n\nNote: '%s' was not found in the VM or could not be run.\n", err, req.Argv[0])
		p.send(s, wire.Stderr, []byte(msg))
		p.sendJSON(s, wire.Exit, wire.ExitStatus{Code: 127})
		return
	}
	go feedStdin(s, stdin)
	timedOut := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		var timer <-chan time.Time
		if req.TimeoutMS > 0 {
			timer = time.After(time.Duration(req.TimeoutMS) * time.Millisecond)
		}
		select {
		case <-timer:
			timedOut <- true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-s.ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-stop:
		}
	}()
	err = cmd.Wait()
	close(stop)
	code := exitCode(cmd, err)
	select {
	case <-timedOut:
		code = timeoutExit
	default:
	}
	p.sendJSON(s, wire.Exit, wire.ExitStatus{Code: code})
}

// exitCode maps a finished command to a shell-style exit code.
func exitCode(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// feedStdin copies Stdin frames into the command until StdinEOF or the end
// of the session.
func feedStdin(s *session, w io.WriteCloser) {
	defer w.Close()
	for {
		select {
		case f := <-s.in:
			switch f.Type {
			case wire.Stdin:
				if _, err := w.Write(f.Payload); err != nil {
					return
				}
			case wire.StdinEOF:
				return
			}
		case <-s.ctx.Done():
			return
		}
	}
}
