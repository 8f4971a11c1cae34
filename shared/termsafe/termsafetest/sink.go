//go:build !hbxrelease

// Package termsafetest checks, for tests, that a process's output carries
// nothing a terminal would obey, as the output comes and without holding
// it: a flood passes through in constant memory.
package termsafetest

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// headSize is how much of the output a Sink keeps to show.
const headSize = 64 << 10

// Sink takes a process's output: it keeps the first 64 KiB to show
// (Head), counts the rest, and notes (Bad) the first character a terminal
// would obey, a control other than newline and tab, DEL, a C1 control or a
// bidirectional control, or bytes that are not UTF-8.
type Sink struct {
	head  bytes.Buffer
	n     int64
	carry []byte
	bad   string
}

// Head is the first 64 KiB of the output.
func (s *Sink) Head() string { return s.head.String() }

// Bad says what the output carried that a terminal would obey, and where;
// "" when nothing.
func (s *Sink) Bad() string { return s.bad }

func (s *Sink) Write(p []byte) (int, error) {
	if s.head.Len() < headSize {
		s.head.Write(p[:min(len(p), headSize-s.head.Len())])
	}
	buf := append(s.carry, p...)
	at := s.n - int64(len(s.carry))
	s.n += int64(len(p))
	for len(buf) > 0 && s.bad == "" && utf8.FullRune(buf) {
		r, size := utf8.DecodeRune(buf)
		switch {
		case r == utf8.RuneError && size == 1:
			s.bad = fmt.Sprintf("bytes that are not UTF-8 at byte %d", at)
		case obeyed(r):
			s.bad = fmt.Sprintf("%U at byte %d", r, at)
		}
		buf, at = buf[size:], at+int64(size)
	}
	s.carry = append(s.carry[:0], buf...)
	if s.bad != "" {
		s.carry = s.carry[:0]
	}
	return len(p), nil
}

// obeyed reports a character a terminal acts on instead of showing.
func obeyed(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}
