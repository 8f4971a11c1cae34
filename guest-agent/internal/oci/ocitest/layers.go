//go:build !hbxrelease

package ocitest

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
)

// ExecutorLayers is a small image shaped like Executor's before v1.5.17
// (the bun workspace layout), as gzipped layers:
// a base layer with paths outside the kept set (bun among them, with the
// given body), the app layer (arch.txt holds arch), and a layer with
// whiteouts.
func ExecutorLayers(t testing.TB, arch, bun string) [][]byte {
	t.Helper()
	base := []tartest.Entry{
		tartest.Dir("etc/"), tartest.File("etc/os-release", "ID=debian\n"),
		tartest.Dir("usr/"), tartest.Dir("usr/local/"), tartest.Dir("usr/local/bin/"),
		{Name: "usr/local/bin/bun", Type: tar.TypeReg, Body: bun, Mode: 0o755},
		tartest.Symlink("usr/local/bin/bunx", "bun"),
	}
	app := []tartest.Entry{
		tartest.Dir("app/"),
		tartest.File("app/package.json", `{"name":"executor-workspace","private":true}`),
		tartest.File("app/bun.lock", "{}\n"),
		tartest.File("app/arch.txt", arch),
		tartest.File("app/stale.txt", "removed by the next layer"),
		tartest.Dir("app/cache/"), tartest.File("app/cache/old", "cleared by an opaque whiteout"),
		tartest.Dir("root/"), tartest.Dir("root/.bun/"), tartest.File("root/.bun/cached.js", "module.exports = 1\n"),
		tartest.Dir("app/node_modules/"), tartest.Hardlink("app/node_modules/cached.js", "root/.bun/cached.js"),
		tartest.Dir("app/apps/"), tartest.Dir("app/apps/host-selfhost/"),
		tartest.File("app/apps/host-selfhost/package.json", `{"name":"@executor-js/host-selfhost","scripts":{"start":"bun run src/serve.ts"}}`),
		tartest.Dir("app/apps/host-selfhost/src/"), tartest.File("app/apps/host-selfhost/src/serve.ts", "console.log('serve')\n"),
		tartest.Dir("app/apps/host-selfhost/dist/"), tartest.File("app/apps/host-selfhost/dist/index.html", "<html></html>\n"),
		{Name: "app/setuid", Type: tar.TypeReg, Body: "x", Mode: 0o4755},
		tartest.File("etc/app-layer-outside", "not kept"),
	}
	wh := []tartest.Entry{
		tartest.File("app/.wh.stale.txt", ""),
		tartest.Dir("app/cache/"), tartest.File("app/cache/.wh..wh..opq", ""), tartest.File("app/cache/new", "after the opaque whiteout"),
		tartest.File("etc/.wh.os-release", ""),
	}
	return [][]byte{tartest.Gzip(t, tartest.Tar(t, base)), tartest.Gzip(t, tartest.Tar(t, app)), tartest.Gzip(t, tartest.Tar(t, wh))}
}

// PackagedExecutorLayers is a small image shaped like Executor's from
// v1.5.17 on (the packaged dist-server layout on a distroless base), as
// gzipped layers: a base layer with bun (with the given body) and paths
// outside the kept set, and the packaged runtime.
func PackagedExecutorLayers(t testing.TB, arch, bun string) [][]byte {
	t.Helper()
	base := []tartest.Entry{
		tartest.Dir("etc/"), tartest.File("etc/os-release", "PRETTY_NAME=\"Distroless\"\n"),
		tartest.Dir("usr/"), tartest.Dir("usr/local/"), tartest.Dir("usr/local/bin/"),
		{Name: "usr/local/bin/bun", Type: tar.TypeReg, Body: bun, Mode: 0o755},
	}
	app := []tartest.Entry{
		tartest.Dir("app/"), tartest.File("app/arch.txt", arch),
		tartest.Dir("app/node_modules/"), tartest.Dir("app/node_modules/quickjs-emscripten/"),
		tartest.File("app/node_modules/quickjs-emscripten/package.json", `{"name":"quickjs-emscripten"}`),
		tartest.Dir("app/apps/"), tartest.Dir("app/apps/host-selfhost/"),
		tartest.Dir("app/apps/host-selfhost/dist-server/"),
		tartest.File("app/apps/host-selfhost/dist-server/serve.js", "import 'quickjs-emscripten';\nconsole.log('serve')\n"),
		tartest.Dir("app/apps/host-selfhost/dist/"), tartest.File("app/apps/host-selfhost/dist/index.html", "<html></html>\n"),
	}
	return [][]byte{tartest.Gzip(t, tartest.Tar(t, base)), tartest.Gzip(t, tartest.Tar(t, app))}
}

// PackagedExecutorImage is PackagedExecutorLayers as a linux image for arch.
func PackagedExecutorImage(t testing.TB, arch, bun string) v1.Image {
	t.Helper()
	return Image(t, "linux", arch, PackagedExecutorLayers(t, arch, bun))
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

// ExecutorV2Layers is a small image shaped like Executor v2's self-host
// beta (ghcr.io/usefulsoftwareco/executor-selfhost:beta): Node instead of
// bun, the server at /app/apps/hosted/self-host/dist/main.mjs, its data in
// /app/data. The agent must refuse it by name.
func ExecutorV2Layers(t testing.TB) [][]byte {
	t.Helper()
	base := []tartest.Entry{
		tartest.Dir("usr/"), tartest.Dir("usr/local/"), tartest.Dir("usr/local/bin/"),
		{Name: "usr/local/bin/node", Type: tar.TypeReg, Body: "#!/bin/sh\n", Mode: 0o755},
	}
	app := []tartest.Entry{
		tartest.Dir("app/"), tartest.Dir("app/data/"),
		tartest.File("app/package.json", `{"name":"executor","private":true}`),
		tartest.Dir("app/apps/"), tartest.Dir("app/apps/hosted/"), tartest.Dir("app/apps/hosted/self-host/"),
		tartest.Dir("app/apps/hosted/self-host/dist/"),
		tartest.File("app/apps/hosted/self-host/dist/main.mjs", "console.log('executor v2')\n"),
	}
	return [][]byte{tartest.Gzip(t, tartest.Tar(t, base)), tartest.Gzip(t, tartest.Tar(t, app))}
}

// ExecutorV2Image is ExecutorV2Layers as a linux image for arch, with v2's
// config: USER node, port 4400, EXECUTOR_DATA_DIR=/app/data and
// `node apps/hosted/self-host/dist/main.mjs` in /app.
func ExecutorV2Image(t testing.TB, arch string) v1.Image {
	t.Helper()
	img := Image(t, "linux", arch, ExecutorV2Layers(t))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.User, cf.Config.WorkingDir = "node", "/app"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "NODE_ENV=production", "PORT=4400", "EXECUTOR_DATA_DIR=/app/data"}
	cf.Config.Cmd = []string{"node", "apps/hosted/self-host/dist/main.mjs"}
	cf.Config.ExposedPorts = map[string]struct{}{"4400/tcp": {}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}
