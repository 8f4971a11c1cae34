package termsafetest

import (
	"strings"
	"testing"
)

// TestSink: what a terminal would obey is found wherever the writes split
// the output, and plain text (multi-byte runes split across writes too)
// passes.
func TestSink(t *testing.T) {
	for _, tc := range []struct {
		out, bad string
	}{
		{"plain\ttext\nwith ✓ and ä\n", ""},
		{"ok \x1b]52;c;x\x07", "U+001B at byte 3"},
		{"ok \u009b1m", "U+009B at byte 3"},
		{"ab\u202e", "U+202E at byte 2"},
		{"a\xffb", "bytes that are not UTF-8 at byte 1"},
		{"cr\r", "U+000D at byte 2"},
	} {
		for split := range len(tc.out) + 1 {
			var s Sink
			s.Write([]byte(tc.out[:split]))
			s.Write([]byte(tc.out[split:]))
			if s.Bad() != tc.bad || s.Head() != tc.out {
				t.Errorf("%q split at %d: bad %q, want %q", tc.out, split, s.Bad(), tc.bad)
			}
		}
	}
	var s Sink
	for range 100 {
		s.Write([]byte(strings.Repeat("A", 64<<10)))
	}
	if s.Bad() != "" || len(s.Head()) != headSize {
		t.Errorf("a flood: bad %q, head %d bytes", s.Bad(), len(s.Head()))
	}
}
