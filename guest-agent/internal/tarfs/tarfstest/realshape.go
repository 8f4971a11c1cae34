//go:build !hbxrelease

// Package tarfstest generates images for tests and benchmarks of the
// unpack: RealShaped builds three gzip -6 layers shaped like the Executor
// image (a Debian-like base, bun and a large node_modules tree, then the
// app with whiteouts of all three kinds), with its entry count, size
// distribution, symlinks and hard links. Content is made up, deterministic
// and about as compressible as the real image's.
package tarfstest

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/gzip"
)

// RealShapedEntries is the entry count of the real Executor image that
// RealShaped copies (all three layers).
const RealShapedEntries = 54876

// Layer is one generated layer blob.
type Layer struct {
	Path    string // the gzip blob
	Entries int    // tar entries
	TarSize int64  // uncompressed tar bytes
}

// RealShaped writes the three layers as layer-1.tar.gz … layer-3.tar.gz
// in dir.
func RealShaped(dir string) ([]Layer, error) { return Scaled(dir, 1) }

// Scaled is RealShaped with every count and the big binary scaled by
// scale (tests use a few percent).
func Scaled(dir string, scale float64) ([]Layer, error) {
	g := &gen{rng: rand.New(rand.NewPCG(20, 26)), mtime: time.Unix(1750000000, 0), scale: scale}
	steps := []func(*layerWriter){g.base, g.runtime, g.app}
	var out []Layer
	for i, step := range steps {
		path := filepath.Join(dir, fmt.Sprintf("layer-%d.tar.gz", i+1))
		l, err := g.write(path, step)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

type gen struct {
	rng   *rand.Rand
	mtime time.Time
	// files of earlier layers that later layers white out or link to.
	baseDocs []string
	modules  []string
	buf      []byte
	// done counts the entries of the layers written so far.
	done  int
	scale float64
}

// n scales a count (at least 1).
func (g *gen) n(count int) int { return max(1, int(float64(count)*g.scale)) }

type layerWriter struct {
	tw      *tar.Writer
	cw      *countWriter
	entries int
	err     error
	g       *gen
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (g *gen) write(path string, step func(*layerWriter)) (Layer, error) {
	f, err := os.Create(path)
	if err != nil {
		return Layer{}, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, err := gzip.NewWriterLevel(bw, 6)
	if err != nil {
		return Layer{}, err
	}
	cw := &countWriter{w: zw}
	lw := &layerWriter{tw: tar.NewWriter(cw), cw: cw, g: g}
	step(lw)
	if lw.err == nil {
		lw.err = lw.tw.Close()
	}
	for _, c := range []func() error{zw.Close, bw.Flush, f.Close} {
		if lw.err == nil {
			lw.err = c()
		}
	}
	g.done += lw.entries
	return Layer{Path: path, Entries: lw.entries, TarSize: cw.n}, lw.err
}

func (lw *layerWriter) header(h *tar.Header, body []byte) {
	if lw.err != nil {
		return
	}
	h.ModTime = lw.g.mtime.Add(time.Duration(lw.entries) * time.Second)
	if h.Typeflag == tar.TypeReg {
		h.Size = int64(len(body))
	}
	if lw.err = lw.tw.WriteHeader(h); lw.err == nil && len(body) > 0 {
		_, lw.err = lw.tw.Write(body)
	}
	lw.entries++
}

func (lw *layerWriter) dir(name string, mode int64) {
	lw.header(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode}, nil)
}

func (lw *layerWriter) file(name string, mode int64, body []byte) {
	lw.header(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode}, body)
}

func (lw *layerWriter) symlink(name, target string) {
	lw.header(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, nil)
}

func (lw *layerWriter) hardlink(name, target string) {
	lw.header(&tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target, Mode: 0o755}, nil)
}

func (lw *layerWriter) whiteout(dir, name string) {
	lw.file(dir+"/.wh."+name, 0o644, nil)
}

// size draws a file size from a log-normal distribution (median, spread),
// bounded.
func (g *gen) size(median float64, sigma float64, limit int) int {
	v := median * math.Exp(sigma*g.rng.NormFloat64())
	return max(0, min(int(v), limit))
}

// text returns n bytes of source-like text: lines of words, some of them
// repeated, as code repeats itself.
func (g *gen) text(n int) []byte {
	g.buf = g.buf[:0]
	var starts []int
	for len(g.buf) < n {
		if len(starts) > 8 && g.rng.IntN(100) < 45 {
			i := len(starts) - 2 - g.rng.IntN(7)
			end := starts[i+1]
			g.buf = append(g.buf, g.buf[starts[i]:end]...)
			starts = append(starts, len(g.buf))
			continue
		}
		for range 4 + g.rng.IntN(8) {
			w := words[g.rng.IntN(len(words))]
			switch g.rng.IntN(40) {
			case 0:
				g.buf = fmt.Appendf(g.buf, "%s%x", w, g.rng.Uint32()&0xfff)
			case 1:
				g.buf = fmt.Appendf(g.buf, "(%d)", g.rng.IntN(1000))
			}
			g.buf = append(g.buf, w...)
			g.buf = append(g.buf, ' ')
		}
		g.buf = append(g.buf, ";\n  "...)
		starts = append(starts, len(g.buf))
	}
	return g.buf[:n]
}

// binary returns n bytes of executable-like content: runs of random bytes,
// of a small alphabet and of zeros.
func (g *gen) binary(n int) []byte {
	g.buf = append(g.buf[:0], make([]byte, n)...)
	for i := 0; i < n; {
		run := min(n-i, 512+g.rng.IntN(4096))
		switch k := g.rng.IntN(100); {
		case k < 17:
			for j := i; j < i+run; j++ {
				g.buf[j] = byte(g.rng.Uint32())
			}
		case k < 80:
			for j := i; j < i+run; j++ {
				g.buf[j] = alphabet[g.rng.IntN(len(alphabet))]
			}
		}
		i += run
	}
	return g.buf
}

var alphabet = []byte{0, 0, 0, 0, 0x48, 0x89, 0x8b, 0xe8, 0xff, 0x0f, 0x85, 0x24, 0xc3, 0x41, 0x01, 0x10}

var words = []string{"const", "function", "return", "export", "import", "from", "this", "value", "options",
	"require", "module", "exports", "undefined", "null", "true", "false", "if", "else", "for", "let", "var",
	"async", "await", "new", "Promise", "resolve", "reject", "error", "data", "length", "push", "map", "=>",
	"{", "}", "[", "]", "=", "===", "!==", "&&", "||", "typeof", "string", "object", "default", "prototype"}

// base is a Debian-like base layer: top-level symlinks into usr, shared
// libraries, binaries (a few hard-linked), documentation and locales.
func (g *gen) base(lw *layerWriter) {
	for _, d := range []string{"etc", "usr", "usr/bin", "usr/sbin", "usr/lib", "usr/share", "usr/share/doc",
		"usr/share/locale", "usr/local", "usr/local/bin", "var", "var/cache", "var/cache/apt", "var/lib", "tmp", "root"} {
		lw.dir(d, 0o755)
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		lw.symlink(l, "usr/"+l)
	}
	lw.dir("usr/lib64", 0o755)
	for i := range g.n(260) {
		lw.file(fmt.Sprintf("usr/bin/tool%03d", i), 0o755, g.binary(g.size(18<<10, 1.2, 4<<20)))
		if i%5 == 0 {
			lw.hardlink(fmt.Sprintf("usr/bin/tool%03d-alias", i), fmt.Sprintf("usr/bin/tool%03d", i))
		}
	}
	for i := range g.n(40) {
		lw.file(fmt.Sprintf("usr/sbin/admin%02d", i), 0o755, g.binary(g.size(80<<10, 1, 2<<20)))
	}
	for i := range g.n(110) {
		d := fmt.Sprintf("usr/lib/lib%03d", i)
		lw.dir(d, 0o755)
		for j := range 12 {
			so := fmt.Sprintf("%s/libpart%02d.so.1.%d", d, j, i%7)
			lw.file(so, 0o644, g.binary(g.size(9<<10, 1.3, 3<<20)))
			lw.symlink(fmt.Sprintf("%s/libpart%02d.so.1", d, j), filepath.Base(so))
		}
	}
	for i := range g.n(420) {
		d := fmt.Sprintf("usr/share/doc/pkg%03d", i)
		lw.dir(d, 0o755)
		for _, n := range []string{"copyright", "changelog.Debian.gz", "README"} {
			p := d + "/" + n
			lw.file(p, 0o644, g.text(g.size(3<<10, 1, 64<<10)))
			g.baseDocs = append(g.baseDocs, p)
		}
	}
	for i := range g.n(90) {
		d := fmt.Sprintf("usr/share/locale/l%02d/LC_MESSAGES", i)
		lw.dir(filepath.Dir(d), 0o755)
		lw.dir(d, 0o755)
		for j := range 8 {
			lw.file(fmt.Sprintf("%s/dom%d.mo", d, j), 0o644, g.text(g.size(6<<10, 1, 200<<10)))
		}
	}
	lw.dir("var/cache/apt/archives", 0o755)
	for i := range g.n(40) {
		lw.file(fmt.Sprintf("var/cache/apt/archives/p%02d.deb", i), 0o644, g.binary(g.size(30<<10, 1, 1<<20)))
	}
}

// runtime is bun and the first, larger part of node_modules.
func (g *gen) runtime(lw *layerWriter) {
	lw.dir("usr/local/bin", 0o755)
	lw.file("usr/local/bin/bun", 0o755, g.binary(g.n(94<<20)))
	lw.symlink("usr/local/bin/bunx", "bun")
	lw.dir("app", 0o755)
	lw.dir("app/node_modules", 0o755)
	lw.dir("app/node_modules/.bin", 0o755)
	g.packages(lw, "app/node_modules", 0, g.n(1900), g.n(22400))
}

// packages writes npm packages pkg from..to with about files files in all.
func (g *gen) packages(lw *layerWriter, root string, from, to, files int) {
	per := files / (to - from)
	for i := from; i < to; i++ {
		p := fmt.Sprintf("%s/pkg-%04d", root, i)
		g.modules = append(g.modules, p)
		lw.dir(p, 0o755)
		lw.file(p+"/package.json", 0o644, g.text(g.size(1200, 0.6, 16<<10)))
		n := max(1, per-2+g.rng.IntN(5))
		if i%11 == 0 {
			lw.file(p+"/native.node", 0o755, g.binary(g.size(60<<10, 1, 6<<20)))
		}
		// Files directory by directory, as a build writes them.
		for k, d := range []string{p, p + "/dist", p + "/lib"} {
			if k > 0 {
				lw.dir(d, 0o755)
			}
			for j := k; j < n; j += 3 {
				lw.file(fmt.Sprintf("%s/m%03d.js", d, j), 0o644, g.text(g.size(1150, 1.45, 1<<20)))
			}
		}

		if i%40 == 7 {
			lw.hardlink(p+"/LICENSE", p+"/package.json")
		}
	}
	for i := from; i < to; i += 3 {
		lw.symlink(fmt.Sprintf("%s/.bin/cmd-%04d", root, i), fmt.Sprintf("../pkg-%04d/m000.js", i))
	}
}

// app is the application layer: its own sources and more packages, and
// whiteouts of files, of whole directories and an opaque directory.
func (g *gen) app(lw *layerWriter) {
	for i, d := range g.baseDocs {
		if i%50 == 0 {
			lw.whiteout(filepath.Dir(d), filepath.Base(d))
		}
	}
	for i := 0; i < len(g.modules); i += 97 {
		if i != 5 {
			lw.whiteout("app/node_modules", filepath.Base(g.modules[i]))
		}
	}
	lw.dir("var/cache/apt", 0o755)
	lw.file("var/cache/apt/.wh..wh..opq", 0o644, nil)
	lw.file("var/cache/apt/pkgcache.bin", 0o644, g.binary(200<<10))
	lw.dir("app/node_modules/pkg-0005", 0o755)
	lw.file("app/node_modules/pkg-0005/.wh..wh..opq", 0o644, nil)
	lw.file("app/node_modules/pkg-0005/index.js", 0o644, g.text(900))
	g.packages(lw, "app/node_modules", g.n(1900), g.n(1900)+g.n(1300), g.n(13000))
	lw.dir("app/apps", 0o755)
	for i := range g.n(30) {
		d := fmt.Sprintf("app/apps/app%02d/src", i)
		lw.dir(filepath.Dir(d), 0o755)
		lw.dir(d, 0o755)
		for j := range 20 {
			lw.file(fmt.Sprintf("%s/f%02d.ts", d, j), 0o644, g.text(g.size(2500, 1, 200<<10)))
		}
	}
	lw.dir("app/dist", 0o755)
	for i := 0; g.done+lw.entries < g.n(RealShapedEntries); i++ {
		lw.file(fmt.Sprintf("app/dist/chunk-%05d.js", i), 0o644, g.text(g.size(1000, 1, 64<<10)))
	}
}
