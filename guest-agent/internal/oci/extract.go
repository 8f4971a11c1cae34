package oci

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	apexlog "github.com/apex/log"
	"github.com/apex/log/handlers/discard"
	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/umoci/oci/layer"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/layercheck"
)

// Keep selects the paths of the image that go into a release. It must also
// select every ancestor directory of a selected path.
type Keep func(parts []string) bool

// KeepExecutor keeps app/… and usr/local/bin/bun (with its parent
// directories), nothing else.
func KeepExecutor(parts []string) bool {
	if len(parts) == 0 {
		return false
	}
	if parts[0] == "app" {
		return true
	}
	bun := []string{"usr", "local", "bin", "bun"}
	return len(parts) <= len(bun) && equalParts(parts, bun[:len(parts)])
}

func equalParts(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ExtractOptions tune Extract. The zero value keeps Executor's paths and
// maps the image's root to the calling user.
type ExtractOptions struct {
	// Keep selects paths; nil means KeepExecutor.
	Keep Keep
	// UID and GID own the unpacked files (umoci's rootless mode with an
	// explicit one-entry map); -1 means the effective ids.
	UID, GID int
}

var quietUmoci sync.Once

// silenceUmoci stops umoci's apex/log from writing plain text to stderr,
// which carries the agent's JSON events.
func silenceUmoci() {
	quietUmoci.Do(func() {
		apexlog.SetHandler(discard.New())
		apexlog.SetLevel(apexlog.ErrorLevel)
	})
}

// Extract unpacks layers (blobs of the OCI layout at layoutDir) into dest,
// which must be missing or empty. Each blob's size and digest are checked, every
// entry goes through the pre-check before umoci sees it, and only kept
// paths are written. On error dest may hold a partial tree: the caller
// removes it (it is always a staging directory).
func Extract(ctx context.Context, layoutDir string, layers []ispec.Descriptor, dest string, opt ExtractOptions) error {
	silenceUmoci()
	if opt.Keep == nil {
		opt.Keep = KeepExecutor
	}
	if opt.UID < 0 {
		opt.UID = os.Geteuid()
	}
	if opt.GID < 0 {
		opt.GID = os.Getegid()
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dest, err)
	}
	if ents, err := os.ReadDir(dest); err != nil || len(ents) > 0 {
		return fmt.Errorf("extracting into %s: not an empty directory (%v)", dest, err)
	}
	unpack := &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{MapOptions: layer.MapOptions{
		Rootless:    true,
		UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(opt.UID), Size: 1}},
		GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(opt.GID), Size: 1}},
	}}}
	c := layercheck.NewChecker()
	for i, desc := range layers {
		c.NextLayer()
		if err := extractLayer(ctx, layoutDir, desc, dest, c, opt.Keep, unpack); err != nil {
			return fmt.Errorf("layer %d (%s): %w", i+1, desc.Digest, err)
		}
	}
	return nil
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

func extractLayer(ctx context.Context, layoutDir string, desc ispec.Descriptor, dest string, c *layercheck.Checker, keep Keep, unpack *layer.UnpackOptions) error {
	s, err := openLayer(layoutDir, desc)
	if err != nil {
		return err
	}
	te := layer.NewTarExtractor(unpack)
	tr := tar.NewReader(s.tar)
	pending := map[string][]*tar.Header{} // unkept hardlink target → kept links
	for {
		if err := ctx.Err(); err != nil {
			s.close()
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.close()
			return fmt.Errorf("reading layer: %w", err)
		}
		e, err := c.Check(hdr)
		if err != nil {
			s.close()
			return err
		}
		if !kept(e, keep) {
			continue
		}
		if e.LinkParts != nil && !keep(e.LinkParts) {
			target := strings.Join(e.LinkParts, "/")
			hdr.Name, hdr.Mode = e.Path(), hdr.Mode&0o777
			pending[target] = append(pending[target], hdr)
			continue
		}
		if err := unpackEntry(te, dest, e, hdr, tr); err != nil {
			s.close()
			return err
		}
	}
	if err := s.finish(string(desc.Digest)); err != nil {
		return err
	}
	if len(pending) > 0 {
		return materializeLinks(layoutDir, desc, dest, pending, unpack)
	}
	return nil
}

// kept reports whether an entry is written: whiteouts count when what they
// remove is kept or contains a kept path.
func kept(e layercheck.Entry, keep Keep) bool {
	if !e.Whiteout {
		return keep(e.Parts)
	}
	return len(e.Target) == 0 || keep(e.Target)
}

// unpackEntry hands one checked entry to umoci with a clean name and no
// set-id or sticky bits.
func unpackEntry(te *layer.TarExtractor, dest string, e layercheck.Entry, hdr *tar.Header, r io.Reader) error {
	if len(e.Parts) == 0 {
		return nil // the layer's root directory: dest is ours
	}
	hdr.Name = e.Path()
	if e.LinkParts != nil {
		hdr.Linkname = strings.Join(e.LinkParts, "/")
	}
	hdr.Mode &= 0o777
	if err := te.UnpackEntry(dest, hdr, r); err != nil {
		return fmt.Errorf("unpacking %q: %w", hdr.Name, err)
	}
	return nil
}

// materializeLinks writes kept hardlinks whose target lies outside the kept
// paths (for example a package cache outside app/) as copies of the target,
// reading the verified layer a second time.
func materializeLinks(layoutDir string, desc ispec.Descriptor, dest string, pending map[string][]*tar.Header, unpack *layer.UnpackOptions) error {
	s, err := openLayer(layoutDir, desc)
	if err != nil {
		return err
	}
	defer s.close()
	te := layer.NewTarExtractor(unpack)
	tr := tar.NewReader(s.tar)
	for len(pending) > 0 {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("re-reading layer for hardlinks: %w", err)
		}
		parts, _ := layercheck.CleanParts(hdr.Name)
		links, ok := pending[strings.Join(parts, "/")]
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		delete(pending, strings.Join(parts, "/"))
		first := *hdr
		first.Name = links[0].Name
		first.Mode &= 0o777
		if err := te.UnpackEntry(dest, &first, tr); err != nil {
			return fmt.Errorf("copying hardlink target to %q: %w", first.Name, err)
		}
		for _, l := range links[1:] {
			l.Linkname = first.Name
			if err := te.UnpackEntry(dest, l, nil); err != nil {
				return fmt.Errorf("unpacking %q: %w", l.Name, err)
			}
		}
	}
	for target := range pending {
		return fmt.Errorf("hardlink target %q is not a regular file of the same layer", target)
	}
	return nil
}
