package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// The interactive exec of releases without LargeExecStdin (1.0.4, read in
// src/agent/client.rs interactive_session and the agent's
// run_interactive_loop): both ends are single loops over one socket.
// The host loop reads one message from the agent, then sends one 4 KiB
// stdin frame with a blocking write whose SO_SNDTIMEO is 10 s; a write
// that makes no progress for that long fails with EAGAIN and the exec
// ends with status 1. The agent loop forwards the command's output with
// blocking sends and writes each stdin frame to the command's stdin pipe
// with a blocking write_all. So when the command writes output while input
// is still coming, and stops reading its input until that output is taken,
// neither loop moves and the host gives up after 10 s. Fixed in 1.8.1
// (#931: a writer thread keeps reading while input waits).
const (
	stdinFrame      = 4096             // STDIN_BUF_SIZE of the host loop
	socketFrames    = 52               // ~208 KiB of frames in flight each way (the socket buffers)
	execSendTimeout = 10 * time.Second // DEFAULT_WRITE_TIMEOUT_SECS of the agent client
)

// stalledInputError is what 1.0.4 prints for the failed write.
const stalledInputError = "io operation failed: Resource temporarily unavailable (os error 11)"

// largeExecStdin says whether the release's row has LargeExecStdin; a
// release outside the table goes with its grammar.
func largeExecStdin() bool {
	r, _, err := pins.Smolvm(release(), true)
	if err != nil {
		return grammar() != smolvmcli.V104
	}
	return r.LargeExecStdin
}

// agentFrame is one message of the agent: output of stream 1 or 2, or the
// command's exit (stream 0).
type agentFrame struct {
	stream int
	data   []byte
	code   int
}

// runSingleLoop runs cmd (not started; Stdin, Stdout and Stderr unset) the
// way 1.0.4's interactive exec does: stdin is pumped by the host loop,
// output comes back through the agent loop. It returns the exit status,
// or an error after a stdin frame waited sendTimeout.
func runSingleLoop(ctx context.Context, cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, sendTimeout time.Duration) (int, error) {
	toGuest := make(chan []byte, socketFrames)
	toHost := make(chan agentFrame, socketFrames)
	if err := startAgentLoop(cmd, toGuest, toHost); err != nil {
		return 0, err
	}
	input := readFrames(stdin)
	for {
		select {
		case f := <-toHost: // the socket first, as the host loop does
			if code, done, err := deliver(f, stdout, stderr); done || err != nil {
				return code, err
			}
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case f := <-toHost:
			if code, done, err := deliver(f, stdout, stderr); done || err != nil {
				return code, err
			}
		case frame, ok := <-input:
			if !ok {
				input, frame = nil, []byte{} // EOF: an empty frame, then no more input
			}
			select {
			case toGuest <- frame:
			case <-time.After(sendTimeout):
				// The host goes away; the agent kills the command.
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				return 0, errors.New(stalledInputError)
			}
		}
	}
}

// deliver writes an output frame; the exit frame ends the session.
func deliver(f agentFrame, stdout, stderr io.Writer) (int, bool, error) {
	switch f.stream {
	case 0:
		return f.code, true, nil
	case 1:
		_, err := stdout.Write(f.data)
		return 0, false, err
	}
	_, err := stderr.Write(f.data)
	return 0, false, err
}

// readFrames reads r in stdin frames; the channel closes at its end.
func readFrames(r io.Reader) chan []byte {
	ch := make(chan []byte)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, stdinFrame)
			n, err := r.Read(buf)
			if n > 0 {
				ch <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// startAgentLoop starts cmd and the agent's single loop: forward the
// command's output to the host with blocking sends, write each stdin frame
// to the command with a blocking write, report the exit when both output
// pipes are done.
func startAgentLoop(cmd *exec.Cmd, toGuest <-chan []byte, toHost chan<- agentFrame) error {
	in, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("command stdin: %w", err)
	}
	out := make(chan agentFrame)
	var pipes []io.Reader
	for _, p := range []func() (io.ReadCloser, error){cmd.StdoutPipe, cmd.StderrPipe} {
		r, err := p()
		if err != nil {
			return fmt.Errorf("command output: %w", err)
		}
		pipes = append(pipes, r)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	for i, r := range pipes {
		go forwardPipe(i+1, r, out)
	}
	go func() {
		for open := 2; open > 0; {
			select {
			case f := <-out:
				if f.data == nil {
					open--
					continue
				}
				toHost <- f
			case frame := <-toGuest:
				if len(frame) == 0 {
					_ = in.Close()
				} else {
					_, _ = in.Write(frame)
				}
			}
		}
		toHost <- agentFrame{code: exitStatus(cmd.Wait())}
	}()
	return nil
}

// forwardPipe reads one output pipe in IO_BUFFER_SIZE pieces; a nil data
// frame says it ended.
func forwardPipe(stream int, r io.Reader, out chan<- agentFrame) {
	for {
		buf := make([]byte, 4096)
		n, err := r.Read(buf)
		if n > 0 {
			out <- agentFrame{stream: stream, data: buf[:n]}
		}
		if err != nil {
			out <- agentFrame{stream: stream}
			return
		}
	}
}
