//go:build !hbxrelease

package ocitest

import (
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Fault changes how the registry serves one blob.
type Fault int

const (
	// FaultNone serves the blob as stored.
	FaultNone Fault = iota
	// FaultCorrupt flips one byte in the middle of the body.
	FaultCorrupt
	// FaultSlow sends the body in small chunks with a pause between them.
	FaultSlow
	// FaultStall sends half the body, then nothing until the client leaves.
	FaultStall
)

const (
	slowChunk = 512
	slowDelay = 20 * time.Millisecond
)

// Registry is go-containerregistry's in-memory registry behind a TLS
// httptest server, with per-blob faults and download counts.
type Registry struct {
	srv    *httptest.Server
	inner  http.Handler
	caFile string

	mu     sync.Mutex
	faults map[string]Fault
	gets   map[string]int
}

// NewRegistry serves on ln, or on a fresh loopback port when ln is nil; the
// server stops when the test ends.
func NewRegistry(t *testing.T, ln net.Listener) *Registry {
	t.Helper()
	r := &Registry{
		inner:  registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		faults: map[string]Fault{},
		gets:   map[string]int{},
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if ln != nil {
		r.srv.Listener.Close()
		r.srv.Listener = ln
	}
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.caFile = filepath.Join(t.TempDir(), "ca.crt")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// Host is the registry's host:port.
func (r *Registry) Host() string { return r.srv.Listener.Addr().String() }

// CAFile is the server's certificate as PEM (for SSL_CERT_FILE).
func (r *Registry) CAFile() string { return r.caFile }

// CADir holds CAFile as ca.crt (a registry certificate directory).
func (r *Registry) CADir() string { return filepath.Dir(r.caFile) }

// SetFault makes the registry serve the blob digest with f.
func (r *Registry) SetFault(digest string, f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[digest] = f
}

// BlobGets counts the GET requests for the blob digest.
func (r *Registry) BlobGets(digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[digest]
}

// AllBlobGets counts the GET requests for any blob.
func (r *Registry) AllBlobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.gets {
		n += c
	}
	return n
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	i := strings.Index(req.URL.Path, "/blobs/sha256:")
	if req.Method != http.MethodGet || i < 0 {
		r.inner.ServeHTTP(w, req)
		return
	}
	digest := req.URL.Path[i+len("/blobs/"):]
	r.mu.Lock()
	r.gets[digest]++
	f := r.faults[digest]
	r.mu.Unlock()
	if f == FaultNone {
		r.inner.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	r.inner.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	switch f {
	case FaultCorrupt:
		body = append([]byte{}, body...)
		body[len(body)/2] ^= 0xff
		_, _ = w.Write(body)
	case FaultSlow:
		for off := 0; off < len(body); off += slowChunk {
			_, _ = w.Write(body[off:min(off+slowChunk, len(body))])
			w.(http.Flusher).Flush()
			select {
			case <-time.After(slowDelay):
			case <-req.Context().Done():
				return
			}
		}
	case FaultStall:
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}
}

// Push stores img, or idx when it is not nil, under repoTag and returns the
// reference pinned by tag and digest ("host/repo:tag@sha256:…"). The
// requests go to the registry in process (so Push works whatever network
// namespace the server listens in) and are neither counted nor faulted.
func (r *Registry) Push(t *testing.T, repoTag string, img v1.Image, idx v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host() + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	opt := remote.WithTransport(handlerTransport{r.inner})
	var d v1.Hash
	if idx != nil {
		err = remote.WriteIndex(ref, idx, opt)
		if err == nil {
			d, err = idx.Digest()
		}
	} else {
		err = remote.Write(ref, img, opt)
		if err == nil {
			d, err = img.Digest()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Host() + "/" + repoTag + "@" + d.String()
}

// handlerTransport answers HTTP requests with a handler, in process.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
