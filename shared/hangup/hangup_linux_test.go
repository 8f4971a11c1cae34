package hangup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWatch checks that the context ends when the reader of the output
// goes away, and only then.
func TestWatch(t *testing.T) {
	quiet := 3 * pollInterval
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
		{"pipe whose reader closes later", func(t *testing.T) io.Writer {
			r, w := pipe(t)
			time.AfterFunc(pollInterval/2, func() { r.Close() })
			return w
		}, true},
		{"socket whose peer closed", func(t *testing.T) io.Writer {
			peer, s := socketPair(t)
			peer.Close()
			return s
		}, true},
		{"pipe with a reader", func(t *testing.T) io.Writer {
			_, w := pipe(t)
			return w
		}, false},
		{"socket with a peer", func(t *testing.T) io.Writer {
			_, s := socketPair(t)
			return s
		}, false},
		{"regular file", func(t *testing.T) io.Writer {
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false},
		{"null device", func(t *testing.T) io.Writer {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
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
			ctx, stop := Watch(t.Context(), tt.out(t))
			defer stop()
			select {
			case <-ctx.Done():
				if !tt.cancelled {
					t.Fatalf("cancelled: %v", context.Cause(ctx))
				}
				if !errors.Is(context.Cause(ctx), ErrClosed) {
					t.Errorf("cause = %v, want %v", context.Cause(ctx), ErrClosed)
				}
			case <-time.After(quiet):
				if tt.cancelled {
					t.Fatalf("not cancelled within %v", quiet)
				}
			}
		})
	}
}

// TestWatchStop checks that stop ends the watch without blaming the
// reader.
func TestWatchStop(t *testing.T) {
	_, w := pipe(t)
	ctx, stop := Watch(t.Context(), w)
	stop()
	<-ctx.Done()
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		t.Errorf("cause = %v, want %v", cause, context.Canceled)
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

func socketPair(t *testing.T) (a, b *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b = os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
