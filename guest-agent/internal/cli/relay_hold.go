package cli

import (
	"io"
	"sync"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// maxHeldOutput bounds what a relay run with --hold-output keeps of each of
// stdout and stderr: the verbs that take large input (snapshot apply) say
// little while reading it.
const maxHeldOutput = 4 << 20

// heldOutput keeps a verb's stdout and stderr (its events and log lines)
// in memory until flush, after the verb returned, writes them out, stdout
// first. A smolvm release whose `machine exec -i` cannot carry output and
// input at the same time (before 1.8.1 its client blocks writing input and
// stops reading output) asks for it with `relay --hold-output`.
type heldOutput struct {
	mu       sync.Mutex // the event writer and the log write stderr apart
	out, err heldStream
}

type heldStream struct {
	mu  *sync.Mutex
	buf *bounded.Buffer
}

func newHeldOutput() *heldOutput {
	h := &heldOutput{}
	h.out = heldStream{mu: &h.mu, buf: bounded.NewBuffer(maxHeldOutput, "the stdout relay --hold-output keeps")}
	h.err = heldStream{mu: &h.mu, buf: bounded.NewBuffer(maxHeldOutput, "the stderr relay --hold-output keeps")}
	return h
}

// Write holds p; past maxHeldOutput it fails with a *bounded.LimitError.
func (s heldStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// flush writes out what is held, stdout first.
func (h *heldOutput) flush(out, errw io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = out.Write(h.out.buf.Bytes())
	_, _ = errw.Write(h.err.buf.Bytes())
}
