package oci

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// entryPath is the selfhost entry inside a release.
const entryPath = "app/apps/host-selfhost/src/serve.ts"

// selfhostDir is the working directory Executor runs in.
const selfhostDir = "app/apps/host-selfhost"

// bunPath is the bun executable inside a release.
const bunPath = "usr/local/bin/bun"

// payloadFile is one file a release must hold, with text it must contain.
type payloadFile struct {
	path     string
	contains []string
}

var payloadFiles = []payloadFile{
	{"app/package.json", []string{"executor-workspace"}},
	{"app/bun.lock", nil},
	{"app/apps/host-selfhost/package.json", []string{"@executor-js/host-selfhost", "bun run src/serve.ts"}},
	{entryPath, nil},
	{"app/apps/host-selfhost/dist/index.html", nil},
}

// maxPayloadRead bounds how much of a payload file is read to look for text.
const maxPayloadRead = 1 << 20

// CheckPayload checks that dir holds a runnable Executor: an executable bun,
// the workspace and selfhost package files, the built web UI and the entry
// point, each a non-empty regular file (never a symlink).
func CheckPayload(dir string) error {
	fi, err := os.Lstat(filepath.Join(dir, bunPath))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || fi.Size() == 0 {
		return fmt.Errorf("release %s: %s is missing or not an executable regular file", dir, bunPath)
	}
	for _, p := range payloadFiles {
		path := filepath.Join(dir, p.path)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			return fmt.Errorf("release %s: %s is missing, empty or not a regular file", dir, p.path)
		}
		if len(p.contains) == 0 {
			continue
		}
		b, err := readHead(path, maxPayloadRead)
		if err != nil {
			return err
		}
		for _, want := range p.contains {
			if !bytes.Contains(b, []byte(want)) {
				return fmt.Errorf("release %s: %s does not mention %q", dir, p.path, want)
			}
		}
	}
	return nil
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
