package tarfs

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"
)

// The layer media types UnpackBlobs reads (OCI and Docker names).
const (
	MediaTypeLayer           = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGzip       = "application/vnd.oci.image.layer.v1.tar+gzip"
	MediaTypeLayerZstd       = "application/vnd.oci.image.layer.v1.tar+zstd"
	MediaTypeDockerLayer     = "application/vnd.docker.image.rootfs.diff.tar"
	MediaTypeDockerLayerGzip = "application/vnd.docker.image.rootfs.diff.tar.gzip"
)

// Blob is one compressed layer of an image, as its manifest describes it.
type Blob struct {
	Path      string
	MediaType string
	Digest    string // sha256:<hex>
	Size      int64
}

// UnpackBlobs applies the layer blobs, in order, to dest (missing or
// empty): each blob's size and digest are checked, every entry goes
// through the pre-check before it is written, and only selected paths are
// written. On error dest may hold a partial tree: the caller removes it (it
// is always a staging directory).
func UnpackBlobs(ctx context.Context, blobs []Blob, dest string, opt UnpackOptions) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dest, err)
	}
	u, err := NewUnpacker(dest, opt)
	if err != nil {
		return err
	}
	for i, b := range blobs {
		if err := u.blob(ctx, b); err != nil {
			u.Abort()
			return fmt.Errorf("layer %d (%s): %w", i+1, b.Digest, err)
		}
	}
	return u.Close()
}

func (u *Unpacker) blob(ctx context.Context, b Blob) error {
	s, err := openBlob(b)
	if err != nil {
		return err
	}
	if err := u.Layer(ctx, s.tar); err != nil {
		s.close()
		return err
	}
	if err := s.finish(b.Digest); err != nil {
		return err
	}
	if !u.Pending() {
		return nil
	}
	// Selected hard links to files outside the selection (a package cache
	// outside app/, say) become copies: read the verified layer again.
	s, err = openBlob(b)
	if err != nil {
		return err
	}
	defer s.close()
	return u.Materialize(ctx, s.tar)
}

// blobStream is a layer blob's uncompressed tar stream and the hash of the
// compressed bytes read so far.
type blobStream struct {
	f    *os.File
	hash hash.Hash
	raw  io.Reader // the compressed bytes, hashed as they are read
	tar  io.Reader
	done func()
	// stop ends the reading goroutine (hashAhead).
	stop func()
}

// The gzip reader decodes ahead of the unpack on its own goroutine, in
// blocks small enough to keep the whole process under 40 MiB.
const (
	gzipBlock  = 512 << 10
	gzipBlocks = 4
)

func openBlob(b Blob) (*blobStream, error) {
	f, err := os.Open(b.Path)
	if err != nil {
		return nil, fmt.Errorf("opening blob: %w", err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != b.Size {
		f.Close()
		return nil, fmt.Errorf("blob %s has size %d, the manifest says %d (%v)", b.Path, sizeOf(fi), b.Size, err)
	}
	s := &blobStream{f: f, hash: sha256.New(), done: func() {}}
	raw, stop := hashAhead(f, s.hash)
	// A bufio.Reader is an io.ByteReader, which the inflater reads from
	// directly; it fills in whole chunks of the reading goroutine.
	s.raw, s.stop = bufio.NewReaderSize(raw, readChunk), stop
	switch b.MediaType {
	case MediaTypeLayerGzip, MediaTypeDockerLayerGzip:
		gz, err := pgzip.NewReaderN(s.raw, gzipBlock, gzipBlocks)
		if err != nil {
			s.stop()
			f.Close()
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		s.tar, s.done = gz, func() { gz.Close() }
	case MediaTypeLayerZstd:
		zr, err := zstd.NewReader(s.raw, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			s.stop()
			f.Close()
			return nil, fmt.Errorf("reading zstd: %w", err)
		}
		s.tar, s.done = zr, zr.Close
	case MediaTypeLayer, MediaTypeDockerLayer:
		s.tar = s.raw
	default:
		s.stop()
		f.Close()
		return nil, fmt.Errorf("unsupported layer media type %q", b.MediaType)
	}
	return s, nil
}

// readChunk is the size of the reads of a blob file.
const readChunk = 256 << 10

// hashAhead reads f on a goroutine of its own, hashing every chunk into h
// before handing it on, so the digest is not computed on the inflater's
// goroutine (the unpack's critical path). The reader returns io.EOF once
// all of f is read and hashed; stop ends the goroutine early.
func hashAhead(f io.Reader, h hash.Hash) (io.Reader, func()) {
	pr, pw := io.Pipe()
	go func() {
		buf := make([]byte, readChunk)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				h.Write(buf[:n])
				if _, werr := pw.Write(buf[:n]); werr != nil {
					return // the reader stopped
				}
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr, func() { pr.CloseWithError(errStopped) }
}

var errStopped = errors.New("blob reading stopped")

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// finish reads the rest of the blob and checks its digest.
func (s *blobStream) finish(want string) error {
	defer s.f.Close()
	defer s.stop()
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

func (s *blobStream) close() {
	s.done()
	s.stop()
	s.f.Close()
}
