package bounded

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	b := NewBuffer(10, "the output of status")
	if _, err := b.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	_, err := b.Write([]byte("x"))
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || le.Limit != 10 {
		t.Fatalf("write past the cap: %v", err)
	}
	if b.Len() != 10 {
		t.Fatalf("buffer holds %d bytes", b.Len())
	}
	if want := "the output of status exceeds the limit of 10 bytes"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int64
		fail bool
	}{{"abc", 3, false}, {"abcd", 3, true}, {"", 0, false}, {"a", 0, true}} {
		got, err := ReadAll(strings.NewReader(tc.in), tc.max, "x")
		if (err != nil) != tc.fail {
			t.Fatalf("%q max %d: err %v", tc.in, tc.max, err)
		}
		if int64(len(got)) > tc.max {
			t.Fatalf("%q max %d: read %d bytes", tc.in, tc.max, len(got))
		}
	}
	// A one-byte reader still stops at the cap.
	r := Reader(io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")), 3, "x")
	got, err := io.ReadAll(r)
	if string(got) != "abc" || !errors.Is(err, ErrLimit) {
		t.Fatalf("got %q, %v", got, err)
	}
	if Human(64<<20) != "64 MiB" || Human(1000) != "1000 bytes" {
		t.Fatal(Human(64<<20), Human(1000))
	}
}

func TestSink(t *testing.T) {
	s := NewSink(4, "smolvm's output")
	for _, p := range []string{"ab", "cde", "f"} {
		if n, err := s.WriteString(p); err != nil || n != len(p) {
			t.Fatalf("write %q: %d %v", p, n, err)
		}
	}
	if s.String() != "ab" || !errors.Is(s.Err(), ErrLimit) {
		t.Fatalf("kept %q, err %v", s.String(), s.Err())
	}
}

// TestNoReadFrom: io.Copy into a Buffer or Sink goes through the cap.
func TestNoReadFrom(t *testing.T) {
	b := NewBuffer(10, "x")
	if _, err := io.Copy(b, strings.NewReader(strings.Repeat("a", 100))); !errors.Is(err, ErrLimit) || b.Len() > 10 {
		t.Fatalf("Buffer: %d bytes, %v", b.Len(), err)
	}
	s := NewSink(10, "x")
	if _, err := io.Copy(s, strings.NewReader(strings.Repeat("a", 100))); err != nil || s.Len() > 10 || s.Err() == nil {
		t.Fatalf("Sink: %d bytes, %v %v", s.Len(), err, s.Err())
	}
}
