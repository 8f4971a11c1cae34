package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// ErrOutputClosed is the cause of a command ended because its stdout or
// stderr was closed (`hermes-box snapshot | head -3`, a reader gone).
var ErrOutputClosed = errors.New("the output was closed")

// Output is f for a command's stdout or stderr. When f is a pipe or a
// socket, the first write that finds its reader gone (EPIPE) ends the
// command through gone, as Ctrl-C does, so the box is put back as it was;
// later writes are dropped. A terminal or a file is f itself: a closed
// terminal is a SIGHUP, and the renderer draws only on an *os.File.
func Output(f *os.File, gone context.CancelCauseFunc) io.Writer {
	info, err := f.Stat()
	if err != nil || info.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	return &pipeOutput{w: f, gone: gone}
}

// pipeOutput is Output's writer on a pipe.
type pipeOutput struct {
	mu     sync.Mutex
	w      io.Writer
	gone   context.CancelCauseFunc
	closed error
}

func (p *pipeOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed != nil {
		return 0, p.closed
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.closed = fmt.Errorf("%w: %w", ErrOutputClosed, err)
		p.gone(p.closed)
		return n, p.closed
	}
	return n, err
}
