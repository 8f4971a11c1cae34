package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "all checks passed", "all checks passed"},
		{"osc52 clipboard", "\x1b]52;c;ZWNobyBwd25lZA==\x07", `\x1b]52;c;ZWNobyBwd25lZA==\x07`},
		{"title", "\x1b]0;sudo\x07x", `\x1b]0;sudo\x07x`},
		{"csi clear", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"c1 csi", "a\u009b2Jb", `a\u009b2Jb`},
		{"del", "a\x7fb", `a\x7fb`},
		{"newline and tab escaped on one line", "a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"invalid utf8", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"bidi override", "ab\u202ecd", `ab\u202ecd`},
		{"unicode kept", "héllo 世界 ✓", "héllo 世界 ✓"},
		{"nul", "a\x00b", `a\x00b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in); got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestTextKeepsLines(t *testing.T) {
	in := "line 1\r\nline\t2\n\x1b[31mred\x1b[0m\rover\n"
	want := "line 1\nline\t2\n\\x1b[31mred\\x1b[0m\\x0dover\n"
	if got := Text(in); got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
}

func TestLinesAreCut(t *testing.T) {
	long := strings.Repeat("a", MaxLine+100)
	got := Text(long + "\nshort\n")
	lines := strings.Split(got, "\n")
	if len(lines[0]) > MaxLine+64 || !strings.Contains(lines[0], "line cut at") {
		t.Fatalf("first line not cut: %d bytes, tail %q", len(lines[0]), lines[0][len(lines[0])-40:])
	}
	if lines[1] != "short" {
		t.Fatalf("line after the cut = %q", lines[1])
	}
	if s := String(strings.Repeat("\x1b", MaxLine)); len(s) > MaxLine+64 {
		t.Fatalf("escaped line not bounded: %d bytes", len(s))
	}
}

// TestWriterSplitWrites feeds the input one byte at a time: runes, escapes
// and CRLF split across writes come out as with one write.
func TestWriterSplitWrites(t *testing.T) {
	in := "é世\r\n\x1b[1m\xff✓\r"
	var whole, split bytes.Buffer
	w := NewWriter(&whole)
	w.Write([]byte(in))
	w.Flush()
	w = NewWriter(&split)
	for i := range len(in) {
		w.Write([]byte{in[i]})
	}
	w.Flush()
	if whole.String() != split.String() {
		t.Fatalf("split writes %q, whole %q", split.String(), whole.String())
	}
	if want := "é世\n\\x1b[1m\uFFFD✓\\x0d"; whole.String() != want {
		t.Fatalf("got %q, want %q", whole.String(), want)
	}
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte("\x1b]52;c;AAAA\x07\r\n\xff\u202e"), 3)
	f.Fuzz(func(t *testing.T, in []byte, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		var out bytes.Buffer
		w := NewWriter(&out)
		for i := 0; i < len(in); i += chunk {
			w.Write(in[i:min(i+chunk, len(in))])
		}
		w.Flush()
		got := out.Bytes()
		if !utf8.Valid(got) {
			t.Fatalf("output not UTF-8: %q", got)
		}
		for _, r := range string(got) {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidi(r) {
				t.Fatalf("control %U in output %q", r, got)
			}
		}
		for _, line := range bytes.Split(got, []byte("\n")) {
			if len(line) > MaxLine+64 {
				t.Fatalf("line of %d bytes", len(line))
			}
		}
		if Text(string(got)) != string(got) {
			t.Fatalf("not idempotent on %q", got)
		}
	})
}

func TestJSON(t *testing.T) {
	in := map[string]string{"m": "a\x1b[1m\x7f\u009b\u202eb"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	safe := JSON(b)
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil || back["m"] != in["m"] {
		t.Fatalf("JSON changed the meaning: %s → %q (%v)", safe, back, err)
	}
	for _, r := range string(safe) {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidi(r) {
			t.Fatalf("control %U left in %s", r, safe)
		}
	}
	// Not JSON at all: a raw answer passed through.
	if got := string(JSON([]byte("x\x1b]0;t\x07\xff\n"))); got != `x\u001b]0;t\u0007`+"\uFFFD\n" {
		t.Fatalf("raw text: %q", got)
	}
	// A CR outside strings is JSON white space (an Executor's answer may
	// carry one): it must not return the cursor.
	crlf := []byte("{\"a\":1,\r\n\r\"b\":\"x\\r\"}\r")
	got := JSON(crlf)
	if bytes.ContainsRune(got, '\r') {
		t.Fatalf("CR left in %q", got)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || m["b"] != "x\r" {
		t.Fatalf("JSON with CRs changed its meaning: %q → %v (%v)", got, m, err)
	}
}
