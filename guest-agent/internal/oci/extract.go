package oci

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
)

// KeepExecutor selects app/… and usr/local/bin/bun; app, usr, usr/local
// and usr/local/bin must be directories (a symlink there would point the
// payload check and the supervisor outside the release).
func KeepExecutor(parts []string) tarfs.Selected {
	if len(parts) == 0 {
		return tarfs.NotSelected
	}
	if parts[0] == "app" {
		if len(parts) == 1 {
			return tarfs.SelectedDir
		}
		return tarfs.SelectedAll
	}
	bun := []string{"usr", "local", "bin", "bun"}
	switch {
	case len(parts) > len(bun) || !slices.Equal(parts, bun[:len(parts)]):
		return tarfs.NotSelected
	case len(parts) == len(bun):
		return tarfs.SelectedAll
	}
	return tarfs.SelectedDir
}

// ExtractOptions tune Extract. The zero value keeps Executor's paths and
// gives the files to the calling user.
type ExtractOptions struct {
	// Keep selects paths; nil means KeepExecutor.
	Keep tarfs.Select
	// UID and GID own the unpacked files; -1 means the effective ids.
	UID, GID int
}

// Extract unpacks layers (blobs of the OCI layout at layoutDir) into dest,
// which must be missing or empty. Each blob's size and digest are checked,
// every entry goes through the pre-check before it is written, and only
// kept paths are written. On error dest may hold a partial tree: the
// caller removes it (it is always a staging directory).
func Extract(ctx context.Context, layoutDir string, layers []ispec.Descriptor, dest string, opt ExtractOptions) error {
	if opt.Keep == nil {
		opt.Keep = KeepExecutor
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dest, err)
	}
	u, err := tarfs.NewUnpacker(dest, tarfs.UnpackOptions{Select: opt.Keep, UID: opt.UID, GID: opt.GID})
	if err != nil {
		return err
	}
	for i, desc := range layers {
		if err := extractLayer(ctx, layoutDir, desc, u); err != nil {
			u.Abort()
			return fmt.Errorf("layer %d (%s): %w", i+1, desc.Digest, err)
		}
	}
	return u.Close()
}

// blobPath is where an OCI layout keeps a blob.
func blobPath(layoutDir string, d string) (string, error) {
	hexPart, err := parseDigest(d)
	if err != nil {
		return "", err
	}
	return filepath.Join(layoutDir, "blobs", "sha256", hexPart), nil
}

// layerStream opens a layer blob and returns its uncompressed tar stream
// and the hash of the compressed bytes read so far.
type layerStream struct {
	f    *os.File
	hash hash.Hash
	raw  io.Reader // the compressed bytes, hashed as they are read
	tar  io.Reader
	done func()
}

func openLayer(layoutDir string, desc ispec.Descriptor) (*layerStream, error) {
	path, err := blobPath(layoutDir, string(desc.Digest))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening blob: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != desc.Size {
		f.Close()
		return nil, fmt.Errorf("blob %s has size %d, the manifest says %d (%v)", path, sizeOf(fi), desc.Size, err)
	}
	s := &layerStream{f: f, hash: sha256.New(), done: func() {}}
	s.raw = io.TeeReader(bufio.NewReaderSize(f, 1<<20), s.hash)
	switch desc.MediaType {
	case ispec.MediaTypeImageLayerGzip, "application/vnd.docker.image.rootfs.diff.tar.gzip":
		gz, err := pgzip.NewReaderN(s.raw, 1<<20, 4)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		s.tar, s.done = gz, func() { gz.Close() }
	case ispec.MediaTypeImageLayerZstd:
		zr, err := zstd.NewReader(s.raw)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading zstd: %w", err)
		}
		s.tar, s.done = zr, zr.Close
	case ispec.MediaTypeImageLayer, "application/vnd.docker.image.rootfs.diff.tar":
		s.tar = s.raw
	default:
		f.Close()
		return nil, fmt.Errorf("unsupported layer media type %q", desc.MediaType)
	}
	return s, nil
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// finish reads the rest of the blob and checks its digest.
func (s *layerStream) finish(want string) error {
	defer s.f.Close()
	defer s.done()
	// onlyReader hides pgzip's WriteTo, which panics after partial reads.
	if _, err := io.Copy(io.Discard, onlyReader{s.tar}); err != nil {
		return fmt.Errorf("reading to the end of the layer: %w", err)
	}
	if _, err := io.Copy(io.Discard, s.raw); err != nil {
		return fmt.Errorf("reading to the end of the blob: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(s.hash.Sum(nil)); got != want {
		return fmt.Errorf("blob digest mismatch: got %s, want %s", got, want)
	}
	return nil
}

type onlyReader struct{ io.Reader }

func (s *layerStream) close() {
	s.done()
	s.f.Close()
}

func extractLayer(ctx context.Context, layoutDir string, desc ispec.Descriptor, u *tarfs.Unpacker) error {
	s, err := openLayer(layoutDir, desc)
	if err != nil {
		return err
	}
	if err := u.Layer(ctx, s.tar); err != nil {
		s.close()
		return err
	}
	if err := s.finish(string(desc.Digest)); err != nil {
		return err
	}
	if !u.Pending() {
		return nil
	}
	// Kept hard links to files outside the kept paths (a package cache
	// outside app/, say) become copies: read the verified layer again.
	s, err = openLayer(layoutDir, desc)
	if err != nil {
		return err
	}
	defer s.close()
	return u.Materialize(ctx, s.tar)
}
