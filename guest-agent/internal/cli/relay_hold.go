package cli

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// maxHeldOutput bounds what a relay run with --hold-output keeps in memory
// before its input ends: the verbs that take large input (snapshot apply)
// say little while reading it.
const maxHeldOutput = 4 << 20

// errHoldFull is the write error past maxHeldOutput.
var errHoldFull = errors.New("relay: more output than --hold-output keeps before the input ends")

// holdOutput keeps the verb's stdout and stderr in memory until its input
// reaches EOF (or the verb returns), then writes them through. A smolvm
// release whose `machine exec -i` cannot carry output and input at the same
// time (before 1.8.1 its client blocks writing input and stops reading
// output) asks for it with `relay --hold-output`.
type holdOutput struct {
	mu       sync.Mutex
	released bool
	held     int
	out, err heldStream
}

type heldStream struct {
	h   *holdOutput
	dst io.Writer
	buf bytes.Buffer
}

func newHoldOutput(out, errw io.Writer) *holdOutput {
	h := &holdOutput{}
	h.out = heldStream{h: h, dst: out}
	h.err = heldStream{h: h, dst: errw}
	return h
}

// Write holds p until release, or writes it through after.
func (s *heldStream) Write(p []byte) (int, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.h.released {
		return s.dst.Write(p)
	}
	if s.h.held+len(p) > maxHeldOutput {
		return 0, errHoldFull
	}
	s.h.held += len(p)
	return s.buf.Write(p)
}

// release writes out what is held, stdout first, and passes later writes
// through. It is idempotent.
func (h *holdOutput) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	for _, s := range []*heldStream{&h.out, &h.err} {
		_, _ = s.dst.Write(s.buf.Bytes())
		s.buf = bytes.Buffer{}
	}
}

// releaseAtEOF is the verb's input: its EOF releases the held output.
type releaseAtEOF struct {
	r io.Reader
	h *holdOutput
}

func (r releaseAtEOF) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if errors.Is(err, io.EOF) {
		r.h.release()
	}
	return n, err
}
