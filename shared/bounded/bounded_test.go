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
