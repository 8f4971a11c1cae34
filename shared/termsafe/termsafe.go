// Package termsafe makes untrusted text safe to show a person on a terminal.
// Everything that comes out of the box (events, stderr, logs, audit lines,
// Executor answers) may have been written by an attacker; shown raw, an
// escape sequence can set the clipboard (OSC 52), retitle the window, move
// the cursor to forge a screen or hide text.
//
// The rules, the same for the host and the agent: C0 controls other than tab
// and newline, DEL and C1 controls are written as visible escapes (\x1b,
// \x7f, \u009b), so an escape sequence shows as text; so are the Unicode
// bidirectional overrides and isolates (\u202e), which reorder what a reader
// sees. A carriage return is dropped before a newline and made visible
// anywhere else. Bytes that are not UTF-8 become U+FFFD. A line longer than
// MaxLine bytes is cut, and the cut is said within those MaxLine bytes, so
// that text made safe once is left as it is when made safe again.
//
// JSON output needs none of this: encoding/json escapes controls itself.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxLine bounds one shown line, in bytes after escaping.
const MaxLine = 8 << 10

// cutMark ends a line that was cut.
const cutMark = " … [line cut at %d bytes]"

// String is s made safe as one line: newlines and tabs are escaped too, and
// the result is at most MaxLine bytes, the cut mark included.
func String(s string) string {
	var b strings.Builder
	w := &Writer{w: &b, max: MaxLine, oneLine: true}
	_, _ = io.WriteString(w, s)
	_ = w.Flush()
	return b.String()
}

// Text is s made safe as text of several lines (newlines and tabs kept).
func Text(s string) string {
	var b strings.Builder
	w := NewWriter(&b)
	_, _ = io.WriteString(w, s)
	_ = w.Flush()
	return b.String()
}

// Writer sanitises a stream on its way to w. It holds back an incomplete
// UTF-8 sequence or a carriage return between writes, and the last
// cut-mark's length of the current line (so a cut line, mark included,
// stays within the bound); a newline or Flush writes what it holds. Not
// safe for concurrent use.
type Writer struct {
	w       io.Writer
	max     int
	oneLine bool
	held    []byte // an incomplete rune, or "\r", from the last Write
	line    int    // bytes of the current line written or pending
	pending []byte // the current line's last bytes, not yet written
	cut     bool   // the current line was cut: drop until the newline
	mark    string // the cut mark for max, made once
	out     []byte
}

// NewWriter returns a Writer keeping newlines and tabs and cutting lines at
// MaxLine bytes.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, max: MaxLine} }

// Write sanitises p. It reports len(p) unless w fails.
func (s *Writer) Write(p []byte) (int, error) {
	s.out = s.out[:0]
	buf := p
	if len(s.held) > 0 {
		buf = append(append([]byte(nil), s.held...), p...)
		s.held = s.held[:0]
	}
	for len(buf) > 0 {
		r, size := utf8.DecodeRune(buf)
		if r == utf8.RuneError && size <= 1 && !utf8.FullRune(buf) {
			s.held = append(s.held, buf...) // wait for the rest of the rune
			break
		}
		if r == '\r' && len(buf) == 1 {
			s.held = append(s.held, '\r') // a newline may follow
			break
		}
		if r == '\r' && buf[1] == '\n' && !s.oneLine {
			buf = buf[1:]
			continue
		}
		s.rune(r, size == 1 && r == utf8.RuneError)
		buf = buf[size:]
	}
	if _, err := s.w.Write(s.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what Write held back (an incomplete rune becomes U+FFFD).
func (s *Writer) Flush() error {
	s.out = s.out[:0]
	for _, c := range s.held {
		if c == '\r' {
			s.rune('\r', false)
		} else {
			s.rune(utf8.RuneError, true)
		}
	}
	s.held = s.held[:0]
	s.out = append(s.out, s.pending...)
	s.pending = s.pending[:0]
	if len(s.out) == 0 {
		return nil
	}
	_, err := s.w.Write(s.out)
	return err
}

func (s *Writer) rune(r rune, invalid bool) {
	if r == '\n' && !s.oneLine {
		s.out = append(append(s.out, s.pending...), '\n')
		s.pending = s.pending[:0]
		s.line, s.cut = 0, false
		return
	}
	if s.cut {
		return
	}
	var text string
	switch {
	case invalid:
		text = "\uFFFD"
	case r == '\t' && !s.oneLine:
		text = "\t"
	case r < 0x20 || r == 0x7f:
		text = fmt.Sprintf(`\x%02x`, r)
	case r >= 0x80 && r <= 0x9f, isBidi(r):
		text = fmt.Sprintf(`\u%04x`, r)
	default:
		text = string(r)
	}
	if s.mark == "" {
		s.mark = fmt.Sprintf(cutMark, s.max)
	}
	mark := s.mark
	if s.line+len(text) > s.max {
		// Keep of the pending bytes what leaves room for the mark, whole
		// runes only: the cut line, mark included, is at most max bytes.
		keep := len(s.pending) - (s.line + len(mark) - s.max)
		for keep > 0 && keep < len(s.pending) && !utf8.RuneStart(s.pending[keep]) {
			keep--
		}
		s.out = append(append(s.out, s.pending[:max(keep, 0)]...), mark...)
		s.pending = s.pending[:0]
		s.cut = true
		return
	}
	s.pending = append(s.pending, text...)
	s.line += len(text)
	// Bytes that can no longer be needed to make room for a mark go out.
	if extra := len(s.pending) - len(mark); extra > 0 {
		for extra > 0 && !utf8.RuneStart(s.pending[extra]) {
			extra--
		}
		s.out = append(s.out, s.pending[:extra]...)
		s.pending = append(s.pending[:0], s.pending[extra:]...)
	}
}

// isBidi reports the bidirectional embeddings, overrides, isolates and marks.
func isBidi(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// Args returns args with every string made safe with String, for
// fmt-style messages built from guest values.
func Args(args ...any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = String(s)
		}
		out[i] = a
	}
	return out
}

// JSON returns the JSON text b with the characters a terminal may obey that
// encoding/json leaves as they are — DEL, the C1 controls and the bidi
// controls — written as \u escapes. The JSON means exactly the same (those
// characters can only occur inside strings); only its bytes are safe to
// print. Text that is not valid JSON (a raw answer passed through) gets its
// C0 controls other than newline and tab escaped the same way, and bytes
// that are not UTF-8 replaced. A carriage return, in JSON only white space
// outside strings, is dropped before a newline and a space elsewhere.
func JSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, "\uFFFD"...)
			b = b[size:]
			continue
		case r == '\r':
			// JSON white space outside strings (raw, it cannot be inside
			// one): dropped before a newline, else a space, so it cannot
			// return the cursor over what was printed.
			if len(b) < 2 || b[1] != '\n' {
				out = append(out, ' ')
			}
			b = b[size:]
			continue
		case r < 0x20 && r != '\n' && r != '\t':
			out = fmt.Appendf(out, `\u%04x`, r)
			b = b[size:]
			continue
		}
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidi(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}
