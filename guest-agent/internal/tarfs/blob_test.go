package tarfs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs/tarfstest"
)

// smallImage writes a real-shaped image at 1% of its size and returns its
// layers with their blobs as a manifest describes them.
func smallImage(t *testing.T) ([]tarfstest.Layer, []Blob) {
	t.Helper()
	ls, err := tarfstest.Scaled(t.TempDir(), 0.01)
	if err != nil {
		t.Fatal(err)
	}
	var blobs []Blob
	for _, l := range ls {
		data, err := os.ReadFile(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		blobs = append(blobs, Blob{Path: l.Path, MediaType: MediaTypeLayerGzip,
			Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))})
	}
	return ls, blobs
}

// TestUnpackBlobsMatchesTar unpacks the layers from their blob files (the
// digest read on its own goroutine) and compares the tree with GNU tar's.
func TestUnpackBlobsMatchesTar(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("GNU tar not found")
		}
		t.Skip("GNU tar not found")
	}
	ls, blobs := smallImage(t)
	got := filepath.Join(t.TempDir(), "agent")
	if err := UnpackBlobs(t.Context(), blobs, got, UnpackOptions{UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	want := t.TempDir()
	if err := tarfstest.TarReference(t.Context(), tarBin, tarfstest.Layers(ls), want); err != nil {
		t.Fatal(err)
	}
	if err := tarfstest.CompareTrees(want, got); err != nil {
		t.Fatal(err)
	}
}

// TestUnpackBlobsRefusesBadBlobs: a blob whose bytes are not the ones the
// manifest names fails the unpack, whether the change is in the digest,
// the size or the bytes themselves.
func TestUnpackBlobsRefusesBadBlobs(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, b *Blob)
		want   string
	}{
		{"digest", func(_ *testing.T, b *Blob) { b.Digest = "sha256:" + strings.Repeat("0", 64) }, "blob digest mismatch"},
		{"size", func(_ *testing.T, b *Blob) { b.Size++ }, "the manifest says"},
		{"one byte past the gzip stream", func(t *testing.T, b *Blob) {
			data, err := os.ReadFile(b.Path)
			if err != nil {
				t.Fatal(err)
			}
			// A byte after the gzip member: read as the start of
			// another member, which ends too early.
			data = append(data, 0)
			b.Path = filepath.Join(t.TempDir(), "changed.tar.gz")
			if err := os.WriteFile(b.Path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			b.Size = int64(len(data))
		}, "reading to the end of the layer: unexpected EOF"},
		{"truncated", func(t *testing.T, b *Blob) {
			data, err := os.ReadFile(b.Path)
			if err != nil {
				t.Fatal(err)
			}
			data = data[:len(data)/2]
			b.Path = filepath.Join(t.TempDir(), "changed.tar.gz")
			if err := os.WriteFile(b.Path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			b.Size = int64(len(data))
		}, "unexpected EOF"},
	}
	_, blobs := smallImage(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := append([]Blob(nil), blobs...)
			tt.change(t, &bs[1])
			err := UnpackBlobs(t.Context(), bs, filepath.Join(t.TempDir(), "d"), UnpackOptions{UID: -1, GID: -1})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("UnpackBlobs = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
