package oci

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	digest "github.com/opencontainers/go-digest"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Events receives progress and log events; *protocol.EventWriter is one.
type Events interface {
	Emit(protocol.Event) error
}

// DefaultStallTimeout is how long a pull may go without receiving a byte.
const DefaultStallTimeout = 600 * time.Second

// ErrStalled is returned when a pull received no bytes for the stall timeout.
var ErrStalled = errors.New("image pull stalled")

// PullOptions tune Pull.
type PullOptions struct {
	// Platform to select from a multi-platform index; the zero value means
	// linux and the agent's own architecture.
	Platform Platform
	// StallTimeout stops a pull that received no bytes for this long; a
	// slow pull that keeps receiving is never stopped. 0 means the default.
	StallTimeout time.Duration
	// CertDir holds extra CA certificates (*.crt) for the registry; "" uses
	// the system's. Tests point it at their TLS server's certificate.
	CertDir string
	// Events receives progress; nil discards it.
	Events Events
}

func (o *PullOptions) fill() {
	if o.Platform == (Platform{}) {
		o.Platform = Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Events == nil {
		o.Events = discardEvents{}
	}
}

type discardEvents struct{}

func (discardEvents) Emit(protocol.Event) error { return nil }

// partialPrefix names a blob being downloaded into a cache; it is renamed
// to its digest only once complete and verified.
const partialPrefix = "oci-put-blob"

// Pull copies the platform image of ref (go-containerregistry's registry
// client, anonymous, https only) into the OCI layout cacheDir and returns
// it verified. Blobs completed by an earlier, failed attempt into the same
// cacheDir are reused; partial blobs are not.
func Pull(ctx context.Context, ref Reference, cacheDir string, opt PullOptions) (*Image, error) {
	opt.fill()
	blobs := filepath.Join(cacheDir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return nil, fmt.Errorf("creating blob cache: %w", err)
	}
	for _, dir := range []string{cacheDir, blobs} {
		if err := removeGlob(dir, partialPrefix+"*"); err != nil {
			return nil, err
		}
	}
	tr, err := transport(opt.CertDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &stallWatch{events: opt.Events}
	w.touch()
	stop := w.watch(cancel, opt.StallTimeout)
	err = pull(ctx, ref, cacheDir, &watchedTransport{base: tr, w: w}, opt)
	stalled := stop()
	switch {
	case err != nil && stalled:
		return nil, fmt.Errorf("%w: no bytes received for %s; stopped the pull (completed blobs stay cached for the next attempt)", ErrStalled, opt.StallTimeout)
	case err != nil:
		return nil, fmt.Errorf("pulling %s: %w", ref.Canonical(), err)
	}
	img, err := openImage(cacheDir, opt.Platform)
	if err != nil {
		return nil, fmt.Errorf("pulled image %s: %w", ref, err)
	}
	return img, nil
}

// pull fetches the manifest for the platform, then every blob not already
// in the cache, then names the manifest in index.json.
func pull(ctx context.Context, ref Reference, cacheDir string, tr http.RoundTripper, opt PullOptions) error {
	r, err := name.ParseReference(ref.Canonical(), name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %s: %w", ref, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithTransport(tr), remote.WithAuth(authn.Anonymous),
		remote.WithUserAgent("hermes-box-agent"),
		remote.WithPlatform(v1.Platform{OS: opt.Platform.OS, Architecture: opt.Platform.Architecture}))
	if err != nil {
		return err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	var m ispec.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return fmt.Errorf("decoding the manifest: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := checkNotV2(config); err != nil {
		return err
	}
	if err := putBytes(cacheDir, string(m.Config.Digest), config); err != nil {
		return err
	}
	for _, l := range m.Layers {
		if err := putLayer(cacheDir, img, l, opt.Events); err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return putManifest(cacheDir, manifest)
}

// putManifest stores the manifest blob and an index.json that names it.
func putManifest(cacheDir string, manifest []byte) error {
	h, _, err := v1.SHA256(strings.NewReader(string(manifest)))
	if err != nil {
		return err
	}
	if err := putBytes(cacheDir, h.String(), manifest); err != nil {
		return err
	}
	var mt struct {
		MediaType string `json:"mediaType"`
	}
	_ = json.Unmarshal(manifest, &mt)
	if mt.MediaType == "" {
		mt.MediaType = ispec.MediaTypeImageManifest
	}
	index := ispec.Index{MediaType: ispec.MediaTypeImageIndex, Manifests: []ispec.Descriptor{{
		MediaType: mt.MediaType, Digest: digestOf(h.String()), Size: int64(len(manifest)),
		Annotations: map[string]string{ispec.AnnotationRefName: refName},
	}}}
	index.SchemaVersion = 2
	b, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cacheDir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(cacheDir, "index.json"), b, 0o600)
}

// putBytes stores a small blob unless the cache has it.
func putBytes(cacheDir, digest string, b []byte) error {
	return putBlob(cacheDir, digest, int64(len(b)), func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(b))), nil
	})
}

func putLayer(cacheDir string, img v1.Image, d ispec.Descriptor, events Events) error {
	h, err := v1.NewHash(string(d.Digest))
	if err != nil {
		return err
	}
	return putBlob(cacheDir, string(d.Digest), d.Size, func() (io.ReadCloser, error) {
		l, err := img.LayerByDigest(h)
		if err != nil {
			return nil, err
		}
		_ = events.Emit(progressEvent("downloading blob", d, 0))
		rc, err := l.Compressed() // verifies the digest when read to the end
		if err != nil {
			return nil, err
		}
		return &progressReader{rc: rc, d: d, events: events}, nil
	})
}

// putBlob writes a blob under a partial name, checks size and digest, and
// renames it into place; a blob already in place is reused.
func putBlob(cacheDir, digest string, size int64, open func() (io.ReadCloser, error)) error {
	hexPart, err := parseDigest(digest)
	if err != nil {
		return err
	}
	final := filepath.Join(cacheDir, "blobs", "sha256", hexPart)
	if fi, err := os.Stat(final); err == nil && fi.Size() == size {
		return nil
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Dir(final), partialPrefix+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	h := newDigester()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("downloading blob %s (its digest is checked while it is read): %w", digest, err)
	}
	if got := h.digest(); n != size || got != digest {
		return fmt.Errorf("blob digest mismatch: got %s (%d bytes), want %s (%d bytes)", got, n, digest, size)
	}
	return os.Rename(f.Name(), final)
}

// transport is the default transport with the system's CAs plus *.crt of
// certDir.
func transport(certDir string) (http.RoundTripper, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if certDir == "" {
		return tr, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	crts, err := filepath.Glob(filepath.Join(certDir, "*.crt"))
	if err != nil {
		return nil, err
	}
	for _, c := range crts {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("reading CA %s: %w", c, err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA %s holds no PEM certificate", c)
		}
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// stallWatch notes when bytes last arrived and cancels the pull once none
// came for the stall timeout.
type stallWatch struct {
	last   atomic.Int64
	events Events
}

func (w *stallWatch) touch() { w.last.Store(time.Now().UnixNano()) }

// watch starts the watchdog; the returned stop ends it and reports whether
// it cancelled the pull.
func (w *stallWatch) watch(cancel func(), timeout time.Duration) func() bool {
	done := make(chan struct{})
	var stalled atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(max(timeout/20, 5*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if time.Since(time.Unix(0, w.last.Load())) > timeout {
					stalled.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return func() bool {
		close(done)
		<-finished
		return stalled.Load()
	}
}

// watchedTransport touches the watch for every response and every read of
// a response body.
type watchedTransport struct {
	base http.RoundTripper
	w    *stallWatch
}

func (t *watchedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.w.touch()
		resp.Body = &touchReader{rc: resp.Body, w: t.w}
	}
	return resp, err
}

type touchReader struct {
	rc io.ReadCloser
	w  *stallWatch
}

func (r *touchReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.w.touch()
	}
	return n, err
}

func (r *touchReader) Close() error { return r.rc.Close() }

// progressReader emits progress events while a blob downloads.
type progressReader struct {
	rc     io.ReadCloser
	d      ispec.Descriptor
	events Events
	n      int64
	last   time.Time
}

func (r *progressReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		_ = r.events.Emit(progressEvent("blob done", r.d, r.d.Size))
	case time.Since(r.last) > time.Second:
		r.last = time.Now()
		_ = r.events.Emit(progressEvent("downloading", r.d, r.n))
	}
	return n, err
}

func (r *progressReader) Close() error { return r.rc.Close() }

func progressEvent(msg string, d ispec.Descriptor, current int64) protocol.Event {
	return protocol.Event{Type: protocol.EventProgress, Step: "executor-pull", Level: protocol.LevelInfo, Message: msg,
		Progress: &protocol.Progress{Current: current, Total: d.Size, Unit: "bytes"},
		Fields:   map[string]string{protocol.FieldBlob: string(d.Digest)}}
}

// removeGlob removes every match of pattern in dir.
func removeGlob(dir, pattern string) error {
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return fmt.Errorf("removing stale %s: %w", m, err)
		}
	}
	return nil
}

// digester hashes what is written to it.
type digester struct{ h hash.Hash }

func newDigester() *digester { return &digester{h: sha256.New()} }

func (d *digester) Write(p []byte) (int, error) { return d.h.Write(p) }

func (d *digester) digest() string { return "sha256:" + hex.EncodeToString(d.h.Sum(nil)) }

func digestOf(s string) digest.Digest { return digest.Digest(s) }
