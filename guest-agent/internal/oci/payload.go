package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// selfhostDir is the working directory Executor runs in, in both layouts.
const selfhostDir = "app/apps/host-selfhost"

// bunPath is the bun executable inside a release, in both layouts.
const bunPath = "usr/local/bin/bun"

// Layout is how an Executor image arranges its runtime. It is recognised by
// what the image holds, never by its tag.
type Layout string

const (
	// LayoutWorkspace is the bun workspace of the images before v1.5.17:
	// app/package.json ("executor-workspace"), app/bun.lock and the
	// selfhost app's sources, started with `bun run src/serve.ts`.
	LayoutWorkspace Layout = "workspace"
	// LayoutPackaged is the packaged runtime from v1.5.17 on (upstream
	// commit cb13484d6, PR #1068): a distroless base, the server bundled
	// into app/apps/host-selfhost/dist-server/serve.js with its external
	// packages in app/node_modules, started with `bun run dist-server/serve.js`.
	LayoutPackaged Layout = "packaged"
)

// layoutSpec is what one layout must hold and how it starts.
type layoutSpec struct {
	// marker is the file whose presence identifies the layout.
	marker string
	// entry is the server's entry point, relative to selfhostDir.
	entry string
	// files must be non-empty regular files, with the text they must contain.
	files []payloadFile
}

// payloadFile is one file a release must hold, with text it must contain.
type payloadFile struct {
	path     string
	contains []string
}

var layouts = map[Layout]layoutSpec{
	LayoutWorkspace: {
		marker: "app/package.json",
		entry:  "src/serve.ts",
		files: []payloadFile{
			{"app/package.json", []string{"executor-workspace"}},
			{"app/bun.lock", nil},
			{"app/apps/host-selfhost/package.json", []string{"@executor-js/host-selfhost", "bun run src/serve.ts"}},
			{"app/apps/host-selfhost/src/serve.ts", nil},
			{"app/apps/host-selfhost/dist/index.html", nil},
		},
	},
	LayoutPackaged: {
		marker: "app/apps/host-selfhost/dist-server/serve.js",
		entry:  "dist-server/serve.js",
		files: []payloadFile{
			{"app/apps/host-selfhost/dist-server/serve.js", nil},
			{"app/apps/host-selfhost/dist/index.html", nil},
		},
	},
}

// layoutOrder fixes the order layouts are tried and named in errors.
var layoutOrder = []Layout{LayoutWorkspace, LayoutPackaged}

// Entry is the layout's server entry point, relative to the selfhost dir.
func (l Layout) Entry() string { return layouts[l].entry }

// maxPayloadRead bounds how much of a payload file is read to look for text.
const maxPayloadRead = 1 << 20

// DetectLayout tells which layout the release in dir holds, from its
// files. A release holding the marker of both, or of neither, is refused;
// one holding Executor v2's entry is refused by name.
func DetectLayout(dir string) (Layout, error) {
	if isV2Release(dir) {
		return "", fmt.Errorf("release %s: %w (it holds %s)", dir, ErrExecutorV2, v2Marker)
	}
	var found []Layout
	for _, l := range layoutOrder {
		if _, err := os.Lstat(filepath.Join(dir, layouts[l].marker)); err == nil {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("release %s: not an Executor image: it holds neither %s (workspace layout, before v1.5.17) nor %s (packaged layout)",
			dir, layouts[LayoutWorkspace].marker, layouts[LayoutPackaged].marker)
	}
	return "", fmt.Errorf("release %s: holds both %s and %s; refusing an image whose layout is ambiguous",
		dir, layouts[LayoutWorkspace].marker, layouts[LayoutPackaged].marker)
}

// CheckPayload checks that dir holds a runnable Executor in one of the
// known layouts: an executable bun and the layout's files, each a
// non-empty regular file reached through real directories of the release
// (no symlink anywhere on the path, so nothing resolves outside it).
func CheckPayload(dir string) error {
	_, err := checkPayload(dir)
	return err
}

func checkPayload(dir string) (Layout, error) {
	l, err := DetectLayout(dir)
	if err != nil {
		return "", err
	}
	fi, err := lstatInside(dir, bunPath)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || fi.Size() == 0 {
		return "", fmt.Errorf("release %s: %s is missing or not an executable regular file inside the release%s", dir, bunPath, because(err))
	}
	for _, p := range layouts[l].files {
		fi, err := lstatInside(dir, p.path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			return "", fmt.Errorf("release %s (%s layout): %s is missing, empty or not a regular file inside the release%s", dir, l, p.path, because(err))
		}
		if err := checkContains(dir, p); err != nil {
			return "", err
		}
	}
	return l, nil
}

func checkContains(dir string, p payloadFile) error {
	if len(p.contains) == 0 {
		return nil
	}
	b, err := readHead(filepath.Join(dir, p.path), maxPayloadRead)
	if err != nil {
		return err
	}
	for _, want := range p.contains {
		if !bytes.Contains(b, []byte(want)) {
			return fmt.Errorf("release %s: %s does not mention %q", dir, p.path, want)
		}
	}
	return nil
}

// errNotRealDir says a path inside a release passes through something
// other than a directory of the release, such as a symlink.
var errNotRealDir = errors.New("is not a real directory of the release (a symlink is refused)")

// lstatInside is Lstat of rel under dir, refusing a path whose directories
// are not real directories of the release: a symlinked usr/ or bin/ could
// point anywhere in the box.
func lstatInside(dir, rel string) (os.FileInfo, error) {
	parts := strings.Split(rel, "/")
	cur := dir
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 {
			return fi, nil
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: %w", strings.Join(parts[:i+1], "/"), errNotRealDir)
		}
	}
	return nil, fmt.Errorf("empty path")
}

func because(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

func readHead(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
