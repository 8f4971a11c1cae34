package cli

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testRegistry is go-containerregistry's in-memory registry behind a TLS
// httptest server; it counts the blob downloads.
type testRegistry struct {
	srv    *httptest.Server
	inner  http.Handler
	caFile string // the server's certificate as PEM (for SSL_CERT_FILE)
	caDir  string // the same as ca.crt (for --registry-ca-dir)

	mu    sync.Mutex
	blobs int
}

// newTestRegistry serves on ln, or on a fresh loopback port when ln is nil.
func newTestRegistry(t *testing.T, ln net.Listener) *testRegistry {
	t.Helper()
	r := &testRegistry{inner: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
			r.mu.Lock()
			r.blobs++
			r.mu.Unlock()
		}
		r.inner.ServeHTTP(w, req)
	}))
	if ln != nil {
		r.srv.Listener.Close()
		r.srv.Listener = ln
	}
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.caDir = t.TempDir()
	r.caFile = filepath.Join(r.caDir, "ca.crt")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *testRegistry) blobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobs
}

// push stores img under repoTag, handing the requests to the registry in
// process (so it works whatever network namespace the server listens in),
// and returns the reference pinned by tag and digest.
func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	host := r.srv.Listener.Addr().String()
	ref, err := name.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(handlerTransport{r.inner})); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return host + "/" + repoTag + "@" + d.String()
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

// executorImage is a one-layer image for this machine's architecture,
// shaped like Executor's, with bun as the given stand-in.
func executorImage(t *testing.T, bun string) v1.Image {
	t.Helper()
	files := []struct {
		name, body string
		mode       int64
	}{
		{"usr/local/bin/bun", bun, 0o755},
		{"app/package.json", `{"name":"executor-workspace","private":true}`, 0o644},
		{"app/bun.lock", "{}\n", 0o644},
		{"app/apps/host-selfhost/package.json", `{"name":"@executor-js/host-selfhost","scripts":{"start":"bun run src/serve.ts"}}`, 0o644},
		{"app/apps/host-selfhost/src/serve.ts", "console.log('serve')\n", 0o644},
		{"app/apps/host-selfhost/dist/index.html", "<html></html>\n", 0o644},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"app", "app/apps", "app/apps/host-selfhost", "app/apps/host-selfhost/dist", "app/apps/host-selfhost/src", "usr", "usr/local", "usr/local/bin"} {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Unix(1700000000, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		t.Fatal(err)
	}
	return img
}

// badDigest is ref with a digest no image in the registry has.
func badDigest(ref string) string {
	last := ref[len(ref)-1]
	flip := byte('0')
	if last == '0' {
		flip = '1'
	}
	return ref[:len(ref)-1] + string(flip)
}
