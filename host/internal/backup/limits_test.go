package backup

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// tarStream writes a gzip tar of n entries named by name(i) with size
// bytes of content each, stopping at the first write error.
func tarStream(w io.Writer, n int, name func(int) string, size int) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	body := make([]byte, size)
	for i := 0; i < n; i++ {
		if err := tw.WriteHeader(&tar.Header{Name: name(i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// TestWriteLimits: a part that breaks a limit fails the snapshot with what
// was exceeded, stops the stream early, and leaves nothing in the backups
// directory.
func TestWriteLimits(t *testing.T) {
	big := strings.Repeat("n", 1<<20-1024) // archive/tar's most

	tests := []struct {
		name  string
		lim   Limits
		src   func(w io.Writer) error
		want  string
		maxIn int64 // the stream must have been cut before this many bytes
	}{
		{"tar-name bomb", Limits{}, func(w io.Writer) error {
			return tarStream(w, 1000, func(i int) string { return big + string(rune('a'+i%26)) }, 0)
		}, "entry name of 1047553 bytes exceeds the limit of 4096 bytes", 64 << 20},
		{"entry flood", Limits{MaxEntries: 1000}, func(w io.Writer) error {
			return tarStream(w, 1_000_000, func(i int) string { return "f" + strings.Repeat("x", i%50) }, 0)
		}, "number of entries exceeds the limit of 1000 entries", 64 << 20},
		{"name bytes flood", Limits{MaxNames: 1 << 20}, func(w io.Writer) error {
			return tarStream(w, 1_000_000, func(i int) string { return strings.Repeat("y", 4000) + string(rune('0'+i%10)) }, 0)
		}, "entry names together exceed", 64 << 20},
		{"oversize part", Limits{MaxPart: 1 << 20}, func(w io.Writer) error {
			return randomTar(w, 64<<20)
		}, "rootfs part of the snapshot (HERMES_BOX_SNAPSHOT_MAX_MIB) exceeds the limit of 1 MiB", 4 << 20},
		{"gzip bomb", Limits{MaxPart: 64 << 20, MaxUnpacked: 8 << 20}, func(w io.Writer) error {
			return tarStream(w, 1, func(int) string { return "bomb" }, 256<<20)
		}, "unpacked archive exceeds the limit of 8 MiB", 64 << 20},
		{"host disk full", Limits{Reserve: 1 << 30, FreeSpace: func(string) (int64, error) { return 1 << 20, nil }}, func(w io.Writer) error {
			return tarStream(w, 1, func(int) string { return "a" }, 1)
		}, "not enough free space on the host", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var sent int64
			src := func(ctx context.Context, part string, w io.Writer) error {
				return tt.src(countingWriter{w, &sent})
			}
			meta := Meta{Machine: "m", Label: "x", Now: time.Now(), Signer: testSigner, Limits: tt.lim}
			if meta.Limits.FreeSpace == nil {
				meta.Limits.FreeSpace = func(string) (int64, error) { return 1 << 40, nil }
			}
			_, err := Write(t.Context(), dir, meta, src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrLimit) && !errors.Is(err, ErrNoSpace) {
				t.Fatalf("%v is neither ErrLimit nor ErrNoSpace", err)
			}
			if sent >= tt.maxIn {
				t.Fatalf("%d bytes were taken from the stream, want fewer than %d", sent, tt.maxIn)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 0 {
				t.Fatalf("left in the backups directory: %v", left)
			}
		})
	}
}

// TestFreeSpaceCheckedWhileWriting: the file system filling up during a
// write fails it and leaves nothing.
func TestFreeSpaceCheckedWhileWriting(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	free := func(string) (int64, error) {
		calls++
		if calls > 2 {
			return 1 << 20, nil
		}
		return 1 << 40, nil
	}
	src := func(ctx context.Context, part string, w io.Writer) error {
		return tarStream(w, 64, func(i int) string { return "f" + string(rune('a'+i%26)) + strings.Repeat("z", i) }, 1<<20)
	}
	meta := Meta{Machine: "m", Now: time.Now(), Signer: testSigner, Limits: Limits{CheckEvery: 1 << 20, FreeSpace: free}}
	_, err := Write(t.Context(), dir, meta, src)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("got %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

// randomTar writes a gzip tar of one entry of size incompressible bytes.
func randomTar(w io.Writer, size int64) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, rand.NewChaCha8([32]byte{1}), size); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

type countingWriter struct {
	w io.Writer
	n *int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// TestFIFORefused: a FIFO in place of a backup file is refused at once
// instead of blocking the verification.
func TestFIFORefused(t *testing.T) {
	dir := t.TempDir()
	for _, name := range append([]string{FileSums}, Files...) {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := Verify(context.Background(), dir, testTrust)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Verify blocked on a FIFO")
	}
}
