// Package bounded caps what a program buffers or copies from a source it
// does not trust. Going over a cap is an error that names what was exceeded
// and the cap, never a silent truncation.
package bounded

import (
	"errors"
	"fmt"
	"io"
)

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("size limit exceeded")

// LimitError says which cap was exceeded.
type LimitError struct {
	What  string // e.g. "the output of executor status"
	Limit int64
	Unit  string // "entries", …; empty for bytes
}

func (e *LimitError) Error() string {
	if e.Unit != "" {
		return fmt.Sprintf("%s exceeds the limit of %d %s", e.What, e.Limit, e.Unit)
	}
	return fmt.Sprintf("%s exceeds the limit of %s", e.What, Human(e.Limit))
}

// Is makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Human writes a byte count n with a binary suffix when it is a round
// multiple ("64 MiB"), else as "N bytes".
func Human(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Buffer holds at most Max bytes: the Write that would pass it writes
// nothing and returns a *LimitError. It has no ReadFrom (io.Copy would use
// it and pass the cap by).
type Buffer struct {
	buf  []byte // grown by append: at most about 1.25 × Max when large
	Max  int
	What string
}

// Bytes, String and Len are those of the bytes held.
func (b *Buffer) Bytes() []byte  { return b.buf }
func (b *Buffer) String() string { return string(b.buf) }
func (b *Buffer) Len() int       { return len(b.buf) }

// NewBuffer returns a Buffer of at most max bytes.
func NewBuffer(max int, what string) *Buffer { return &Buffer{Max: max, What: what} }

func (b *Buffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.Max {
		return 0, &LimitError{What: b.What, Limit: int64(b.Max)}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// WriteString implements io.StringWriter with the same cap.
func (b *Buffer) WriteString(s string) (int, error) { return b.Write([]byte(s)) }

// Reader returns a reader of r that fails with a *LimitError once more than
// max bytes have been read (max bytes are passed on first).
func Reader(r io.Reader, max int64, what string) io.Reader {
	return &reader{r: r, left: max, max: max, what: what}
}

type reader struct {
	r         io.Reader
	left, max int64
	what      string
}

func (l *reader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, &LimitError{What: l.what, Limit: l.max}
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - 1, &LimitError{What: l.what, Limit: l.max}
	}
	return n, err
}

// ReadAll reads r to its end, failing past max bytes.
func ReadAll(r io.Reader, max int64, what string) ([]byte, error) {
	return io.ReadAll(Reader(r, max, what))
}

// Sink is a Buffer for a writer that must not fail, such as a child
// process's stdout (a failed write there leaves the child blocked on a full
// pipe): past Max it keeps accepting bytes but drops them, and Err reports
// the *LimitError.
type Sink struct {
	Buffer
	err error
}

// NewSink returns a Sink of at most max bytes.
func NewSink(max int, what string) *Sink { return &Sink{Buffer: Buffer{Max: max, What: what}} }

func (s *Sink) Write(p []byte) (int, error) {
	if s.err != nil {
		return len(p), nil
	}
	if _, err := s.Buffer.Write(p); err != nil {
		s.err = err
	}
	return len(p), nil
}

// Err is the *LimitError once more than Max bytes were written.
func (s *Sink) Err() error { return s.err }

// WriteString implements io.StringWriter like Write.
func (s *Sink) WriteString(p string) (int, error) { return s.Write([]byte(p)) }
