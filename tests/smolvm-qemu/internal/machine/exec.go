package machine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// ExecOptions are the flags of `machine exec`.
type ExecOptions struct {
	Argv    []string
	Env     []string
	Workdir string
	Timeout time.Duration
	Stream  bool // write output as it arrives; otherwise after the exit, as smolvm does
}

// running loads a machine and checks it runs.
func (s *Store) running(ctx context.Context, name, op string) (*Record, error) {
	r, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	if st := s.State(ctx, r); st != Running {
		return nil, agentError(op, fmt.Errorf("machine '%s' is not running (state: %s); start it with: smolvm machine start --name %s", name, st, name))
	}
	return r, nil
}

// Exec runs a command in the guest with stdin forwarded and returns its
// exit code (124 after the timeout, 128+N after signal N).
func (s *Store) Exec(ctx context.Context, name string, o ExecOptions, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := s.running(ctx, name, "exec")
	if err != nil {
		return 1, err
	}
	env, err := s.guestEnv(r, o.Env)
	if err != nil {
		return 1, err
	}
	c, err := dialCtl(ctx, s.DataDir(name), time.Minute)
	if err != nil {
		return 1, agentError("exec", err)
	}
	defer c.Close()
	req := wire.ExecRequest{Argv: o.Argv, Env: env, Dir: o.Workdir, TimeoutMS: o.Timeout.Milliseconds()}
	if err := c.sendJSON(wire.Exec, req); err != nil {
		return 1, agentError("exec", err)
	}
	if stdin != nil {
		go forwardStdin(c, stdin)
	} else {
		_ = c.send(wire.StdinEOF, nil)
	}
	var bufOut, bufErr bytes.Buffer
	out, errw := io.Writer(&bufOut), io.Writer(&bufErr)
	if o.Stream {
		out, errw = stdout, stderr
	}
	code, err := c.collect(out, errw)
	if !o.Stream {
		_, _ = stdout.Write(bufOut.Bytes())
		_, _ = stderr.Write(bufErr.Bytes())
	}
	if err != nil {
		return 1, agentError("exec", err)
	}
	return code, nil
}

// forwardStdin sends stdin as Stdin frames, then StdinEOF.
func forwardStdin(c *ctlConn, r io.Reader) {
	buf := make([]byte, wire.Chunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if c.send(wire.Stdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = c.send(wire.StdinEOF, nil)
			return
		}
	}
}

// collect copies output frames until the Exit frame.
func (c *ctlConn) collect(stdout, stderr io.Writer) (int, error) {
	for {
		f, err := c.recv()
		if err != nil {
			return 1, err
		}
		switch f.Type {
		case wire.Stdout:
			_, _ = stdout.Write(f.Payload)
		case wire.Stderr:
			_, _ = stderr.Write(f.Payload)
		case wire.Exit:
			var st wire.ExitStatus
			if err := json.Unmarshal(f.Payload, &st); err != nil {
				return 1, fmt.Errorf("bad exit frame: %w", err)
			}
			return st.Code, nil
		}
	}
}
