package ocitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one tar entry of a test layer.
type Entry struct {
	Name string
	Type byte
	Body string
	Link string
	Mode int64
}

// File is a regular file entry (mode 0644).
func File(name, body string) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Body: body, Mode: 0o644}
}

// Dir is a directory entry (mode 0755).
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: 0o755} }

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target, Mode: 0o777}
}

// Hardlink is a hard link entry.
func Hardlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeLink, Link: target, Mode: 0o644}
}

// Special is an entry of the given type with no body (a device or a fifo).
func Special(name string, typ byte) Entry { return Entry{Name: name, Type: typ, Mode: 0o644} }

// Tar writes entries as an uncompressed PAX tar with a fixed mtime.
func Tar(t testing.TB, ents []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Link, Mode: e.Mode, Size: int64(len(e.Body)),
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.Type != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Gzip compresses b.
func Gzip(t testing.TB, b []byte) []byte {
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

// ExecutorLayers is a small image shaped like Executor's, as gzipped layers:
// a base layer with paths outside the kept set (bun among them, with the
// given body), the app layer (arch.txt holds arch), and a layer with
// whiteouts.
func ExecutorLayers(t testing.TB, arch, bun string) [][]byte {
	t.Helper()
	base := []Entry{
		Dir("etc/"), File("etc/os-release", "ID=debian\n"),
		Dir("usr/"), Dir("usr/local/"), Dir("usr/local/bin/"),
		{Name: "usr/local/bin/bun", Type: tar.TypeReg, Body: bun, Mode: 0o755},
		Symlink("usr/local/bin/bunx", "bun"),
	}
	app := []Entry{
		Dir("app/"),
		File("app/package.json", `{"name":"executor-workspace","private":true}`),
		File("app/bun.lock", "{}\n"),
		File("app/arch.txt", arch),
		File("app/stale.txt", "removed by the next layer"),
		Dir("app/cache/"), File("app/cache/old", "cleared by an opaque whiteout"),
		Dir("root/"), Dir("root/.bun/"), File("root/.bun/cached.js", "module.exports = 1\n"),
		Dir("app/node_modules/"), Hardlink("app/node_modules/cached.js", "root/.bun/cached.js"),
		Dir("app/apps/"), Dir("app/apps/host-selfhost/"),
		File("app/apps/host-selfhost/package.json", `{"name":"@executor-js/host-selfhost","scripts":{"start":"bun run src/serve.ts"}}`),
		Dir("app/apps/host-selfhost/src/"), File("app/apps/host-selfhost/src/serve.ts", "console.log('serve')\n"),
		Dir("app/apps/host-selfhost/dist/"), File("app/apps/host-selfhost/dist/index.html", "<html></html>\n"),
		{Name: "app/setuid", Type: tar.TypeReg, Body: "x", Mode: 0o4755},
		File("etc/app-layer-outside", "not kept"),
	}
	wh := []Entry{
		File("app/.wh.stale.txt", ""),
		Dir("app/cache/"), File("app/cache/.wh..wh..opq", ""), File("app/cache/new", "after the opaque whiteout"),
		File("etc/.wh.os-release", ""),
	}
	return [][]byte{Gzip(t, Tar(t, base)), Gzip(t, Tar(t, app)), Gzip(t, Tar(t, wh))}
}

// Image builds a single-platform OCI image from gzipped layers.
func Image(t testing.TB, osName, arch string, layers [][]byte) v1.Image {
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

// ExecutorImage is ExecutorLayers as a linux image for arch.
func ExecutorImage(t testing.TB, arch, bun string) v1.Image {
	t.Helper()
	return Image(t, "linux", arch, ExecutorLayers(t, arch, bun))
}

// TwoArchIndex builds an index with an amd64 and an arm64 ExecutorImage.
func TwoArchIndex(t testing.TB, bun string) (v1.ImageIndex, map[string]v1.Image) {
	t.Helper()
	imgs := map[string]v1.Image{}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		imgs[arch] = ExecutorImage(t, arch, bun)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imgs[arch],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, imgs
}

// LayerDigests lists an image's layer digests.
func LayerDigests(t testing.TB, img v1.Image) []string {
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

// ImageDigest is an image's manifest digest.
func ImageDigest(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
