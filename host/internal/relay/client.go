package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"golang.org/x/crypto/ssh"
)

// Client runs agent verbs on one open SSH connection, one session per call.
// Calls may run concurrently. A call whose stdin or stdout fails closes its
// own session, and the other calls go on; a call whose ctx is cancelled
// closes the connection (ending a session needs the remote side's answer,
// ending the connection does not), which ends every call on it, and later
// calls then fail. Get a Client from SSH.Dial.
type Client struct {
	conn    *ssh.Client
	addr    string
	command string
	pump    *ackPump // stopped once a session has started
}

var _ Transport = (*Client)(nil)

// Close closes the connection.
func (c *Client) Close() error {
	c.pump.stop()
	return c.conn.Close()
}

// Run implements Transport on the client's connection. The request is
// validated before anything is sent. When stdin is not nil the request says
// so (Options.Stdin) and stdin's bytes follow the request line. Run may
// return while a Read on stdin is still blocked; stdin is not read again
// after that Read returns.
func (c *Client) Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	verb := "request"
	if len(req.Argv) > 0 {
		verb = fmt.Sprintf("%q", req.Argv[0])
	}
	code, err := c.run(ctx, req, stdin, stdout, onEvent)
	if err != nil {
		// Only the verb is named: arguments stay out of error messages.
		return -1, fmt.Errorf("relaying %s to %s: %w", verb, c.addr, err)
	}
	return code, nil
}

func (c *Client) run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	if stdin != nil {
		req.Options.Stdin = true
	}
	var line bytes.Buffer
	if err := protocol.WriteRequest(&line, req); err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()

	sess, err := c.conn.NewSession()
	if err != nil {
		return -1, orCause(ctx, fmt.Errorf("opening session: %w", err))
	}
	defer sess.Close()
	abort := func() { sess.Close() } // a second Close only reports io.EOF
	pipes, err := openPipes(sess)
	if err != nil {
		return -1, err
	}
	if err := sess.Start(c.command); err != nil {
		return -1, orCause(ctx, fmt.Errorf("starting remote command: %w", err))
	}
	c.pump.stop()

	inErr := make(chan error, 1)
	go sendInput(pipes.stdin, line.Bytes(), stdin, inErr, abort)
	out := &recordingWriter{w: stdout}
	if stdout == nil {
		out.w = io.Discard
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := io.Copy(out, pipes.stdout); err != nil && out.err != nil {
			abort()
		}
	})
	var stderrErr error
	wg.Go(func() {
		if stderrErr = readEvents(pipes.stderr, onEvent, stderrLimit(ctx)); stderrErr != nil {
			abort()
			io.Copy(io.Discard, pipes.stderr)
		}
	})
	waitErr := sess.Wait()
	wg.Wait()
	if stderrErr != nil {
		return -1, stderrErr
	}
	return result(ctx, waitErr, out.err, inErr)
}

// result turns the session's end into an exit code or the error that
// explains an aborted call.
func result(ctx context.Context, waitErr, outErr error, inErr <-chan error) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, context.Cause(ctx)
	}
	if outErr != nil {
		return -1, fmt.Errorf("writing stdout: %w", outErr)
	}
	select {
	case err := <-inErr:
		return -1, fmt.Errorf("reading stdin: %w", err)
	default:
	}
	// A direct type switch: only the session's own verdicts count.
	switch e := waitErr.(type) {
	case nil:
		return 0, nil
	case *ssh.ExitError:
		return e.ExitStatus(), nil
	case *ssh.ExitMissingError:
		return -1, errors.New("remote command ended without an exit status (connection lost?)")
	default:
		return -1, fmt.Errorf("waiting for remote command: %w", waitErr)
	}
}

// orCause prefers the context's reason when ctx ended the call.
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

type sessionPipes struct {
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
}

// openPipes takes all three pipes, so that Wait waits for the exit status
// only and every copy is under this package's control.
func openPipes(sess *ssh.Session) (sessionPipes, error) {
	var p sessionPipes
	var err error
	if p.stdin, err = sess.StdinPipe(); err != nil {
		return p, fmt.Errorf("opening stdin: %w", err)
	}
	if p.stdout, err = sess.StdoutPipe(); err != nil {
		return p, fmt.Errorf("opening stdout: %w", err)
	}
	if p.stderr, err = sess.StderrPipe(); err != nil {
		return p, fmt.Errorf("opening stderr: %w", err)
	}
	return p, nil
}

// sendInput writes the request line, then copies stdin, then closes the
// remote stdin. A failure to write means the remote side stopped reading,
// which its exit status explains; a failure to read stdin must not look like
// a clean end of input, so it aborts the call instead of closing stdin.
func sendInput(w io.WriteCloser, line []byte, stdin io.Reader, inErr chan<- error, abort func()) {
	if _, err := w.Write(line); err != nil {
		return
	}
	if stdin != nil {
		r := &recordingReader{r: stdin}
		if _, err := io.Copy(w, r); err != nil {
			if r.err != nil {
				inErr <- r.err
				abort()
			}
			return
		}
	}
	w.Close()
}

// recordingWriter remembers the first error of its writer, to tell it apart
// from errors of the other side of a copy.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (rw *recordingWriter) Write(p []byte) (int, error) {
	n, err := rw.w.Write(p)
	if err != nil && rw.err == nil {
		rw.err = err
	}
	return n, err
}

// recordingReader remembers the first error of its reader other than EOF.
type recordingReader struct {
	r   io.Reader
	err error
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && rr.err == nil {
		rr.err = err
	}
	return n, err
}
