package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchOutput checks that a relayed verb's context ends when the
// reader of its output goes away, and only then.
func TestWatchOutput(t *testing.T) {
	quiet := 3 * outputPollMillis * time.Millisecond
	tests := []struct {
		name      string
		out       func(t *testing.T) io.Writer
		cancelled bool
	}{
		{"pipe whose reader closed", func(t *testing.T) io.Writer {
			r, w := pipe(t)
			r.Close()
			return w
		}, true},
		{"pipe with a reader", func(t *testing.T) io.Writer {
			_, w := pipe(t)
			return w
		}, false},
		{"regular file", func(t *testing.T) io.Writer {
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false},
		{"not a file", func(*testing.T) io.Writer { return &bytes.Buffer{} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, stop := watchOutput(t.Context(), tt.out(t))
			defer stop()
			select {
			case <-ctx.Done():
				if !tt.cancelled {
					t.Fatalf("cancelled: %v", context.Cause(ctx))
				}
				if context.Cause(ctx) != errOutputClosed {
					t.Errorf("cause = %v, want %v", context.Cause(ctx), errOutputClosed)
				}
			case <-time.After(quiet):
				if tt.cancelled {
					t.Fatalf("not cancelled within %v", quiet)
				}
			}
		})
	}
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
