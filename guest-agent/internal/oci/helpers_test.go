package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
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
	"github.com/opencontainers/go-digest"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// ent is one tar entry of a test layer.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}
func special(name string, typ byte) ent { return ent{name: name, typ: typ, mode: 0o644} }

// tarBytes writes entries as an uncompressed tar.
func tarBytes(t testing.TB, ents []ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)),
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeLayout stores gzipped layer blobs in an OCI layout's blob dir and
// returns their descriptors.
func writeLayout(t testing.TB, dir string, layers ...[]byte) []ispec.Descriptor {
	t.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []ispec.Descriptor
	for _, l := range layers {
		sum := sha256.Sum256(l)
		h := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(blobs, h), l, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, ispec.Descriptor{MediaType: ispec.MediaTypeImageLayerGzip, Digest: digest.Digest("sha256:" + h), Size: int64(len(l))})
	}
	return out
}

// readTestdata reads a file of testdata.
func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// executorLayers is a small image shaped like Executor's: a base layer with
// paths outside the kept set, the app layer, and a layer with whiteouts.
func executorLayers(t testing.TB, arch, bun string) [][]byte {
	t.Helper()
	base := []ent{
		dir("etc/"), file("etc/os-release", "ID=debian\n"),
		dir("usr/"), dir("usr/local/"), dir("usr/local/bin/"),
		{name: "usr/local/bin/bun", typ: tar.TypeReg, body: bun, mode: 0o755},
		symlink("usr/local/bin/bunx", "bun"),
	}
	app := []ent{
		dir("app/"),
		file("app/package.json", `{"name":"executor-workspace","private":true}`),
		file("app/bun.lock", "{}\n"),
		file("app/arch.txt", arch),
		file("app/stale.txt", "removed by the next layer"),
		dir("app/cache/"), file("app/cache/old", "cleared by an opaque whiteout"),
		dir("root/"), dir("root/.bun/"), file("root/.bun/cached.js", "module.exports = 1\n"),
		dir("app/node_modules/"), hardlink("app/node_modules/cached.js", "root/.bun/cached.js"),
		dir("app/apps/"), dir("app/apps/host-selfhost/"),
		file("app/apps/host-selfhost/package.json", `{"name":"@executor-js/host-selfhost","scripts":{"start":"bun run src/serve.ts"}}`),
		dir("app/apps/host-selfhost/src/"), file("app/apps/host-selfhost/src/serve.ts", "console.log('serve')\n"),
		dir("app/apps/host-selfhost/dist/"), file("app/apps/host-selfhost/dist/index.html", "<html></html>\n"),
		{name: "app/setuid", typ: tar.TypeReg, body: "x", mode: 0o4755},
		file("etc/app-layer-outside", "not kept"),
	}
	wh := []ent{
		file("app/.wh.stale.txt", ""),
		dir("app/cache/"), file("app/cache/.wh..wh..opq", ""), file("app/cache/new", "after the opaque whiteout"),
		file("etc/.wh.os-release", ""),
	}
	return [][]byte{gzipBytes(t, tarBytes(t, base)), gzipBytes(t, tarBytes(t, app)), gzipBytes(t, tarBytes(t, wh))}
}

// testImage builds a single-platform OCI image from gzipped layers.
func testImage(t testing.TB, osName, arch string, layers [][]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = osName, arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		l := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l)), nil },
			tarball.WithMediaType(types.OCILayer))
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// twoArchIndex builds an index with an amd64 and an arm64 child.
func twoArchIndex(t testing.TB, bun string) (v1.ImageIndex, map[string]v1.Image) {
	t.Helper()
	imgs := map[string]v1.Image{}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		imgs[arch] = testImage(t, "linux", arch, executorLayers(t, arch, bun))
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imgs[arch],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, imgs
}

// fault changes how the registry serves one blob.
type fault int

const (
	faultNone fault = iota
	faultCorrupt
	faultSlow
	faultStall
)

// testRegistry is go-containerregistry's in-memory registry behind a TLS
// httptest server on loopback, with per-blob faults and request counts.
type testRegistry struct {
	srv     *httptest.Server
	certDir string
	mu      sync.Mutex
	faults  map[string]fault
	gets    map[string]int
	// slowChunk and slowDelay shape faultSlow.
	slowChunk int
	slowDelay time.Duration
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{faults: map[string]fault{}, gets: map[string]int{}, slowChunk: 512, slowDelay: 20 * time.Millisecond}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.serve(inner, w, req)
	}))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.certDir = t.TempDir()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(r.certDir, "ca.crt"), pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *testRegistry) host() string { return strings.TrimPrefix(r.srv.URL, "https://") }

func (r *testRegistry) setFault(digest string, f fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[digest] = f
}

func (r *testRegistry) blobGets(digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[digest]
}

func (r *testRegistry) serve(inner http.Handler, w http.ResponseWriter, req *http.Request) {
	i := strings.Index(req.URL.Path, "/blobs/sha256:")
	if req.Method != http.MethodGet || i < 0 {
		inner.ServeHTTP(w, req)
		return
	}
	digest := req.URL.Path[i+len("/blobs/"):]
	r.mu.Lock()
	r.gets[digest]++
	f := r.faults[digest]
	r.mu.Unlock()
	if f == faultNone {
		inner.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	switch f {
	case faultCorrupt:
		body = append([]byte{}, body...)
		body[len(body)/2] ^= 0xff
		_, _ = w.Write(body)
	case faultSlow:
		for off := 0; off < len(body); off += r.slowChunk {
			_, _ = w.Write(body[off:min(off+r.slowChunk, len(body))])
			w.(http.Flusher).Flush()
			select {
			case <-time.After(r.slowDelay):
			case <-req.Context().Done():
				return
			}
		}
	case faultStall:
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}
}

// push uploads an image or index under repo:tag and returns the pinned
// reference.
func (r *testRegistry) push(t *testing.T, repoTag string, img v1.Image, idx v1.ImageIndex) Reference {
	t.Helper()
	ref, err := name.ParseReference(r.host() + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	opt := remote.WithTransport(r.srv.Client().Transport)
	var d v1.Hash
	if idx != nil {
		err = remote.WriteIndex(ref, idx, opt)
		d, _ = idx.Digest()
	} else {
		err = remote.Write(ref, img, opt)
		d, _ = img.Digest()
	}
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := ParseReference(ref.String() + "@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	return pinned
}

// layerDigests lists an image's layer digests.
func layerDigests(t testing.TB, img v1.Image) []string {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range m.Layers {
		out = append(out, l.Digest.String())
	}
	return out
}

func imageDigest(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// treeSnapshot lists every path under root with its type and size, except
// paths under skip.
func treeSnapshot(t testing.TB, root string, skip ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s {
				return filepath.SkipDir
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+fi.Mode().String()+" "+sizeString(fi))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func sizeString(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "-"
	}
	b, _ := json.Marshal(fi.Size())
	return string(b)
}

// recordEvents collects emitted events.
type recordEvents struct {
	mu  sync.Mutex
	evs []string
}

func (r *recordEvents) Emit(ev protocol.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, string(ev.Type)+":"+ev.Message)
	return nil
}

func (r *recordEvents) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}
