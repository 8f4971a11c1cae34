package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// sourceRoots are what `make build` reads: the module files and the
// sources of both binaries.
var sourceRoots = []string{"go.mod", "go.sum", "Makefile", "host", "shared", "guest-agent", "scripts"}

// maxSources bounds the files ProjectSources collects.
const maxSources = 20000

// ProjectSources lists the files below root a portable package carries so
// that the host binary can be built on a platform it has no binary for:
// the module files, the Makefile and the Go sources, without tests and
// test data. Symbolic links and anything not regular are skipped.
func ProjectSources(root string) ([]PackFile, error) {
	var out []PackFile
	for _, top := range sourceRoots {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != filepath.Join(root, top) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || strings.HasSuffix(d.Name(), "_test.go") {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if len(out) >= maxSources {
				return fmt.Errorf("more than %d source files below %s", maxSources, root)
			}
			out = append(out, PackFile{Name: filepath.ToSlash(rel), Path: p, Mode: info.Mode().Perm()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("collecting the project's sources: %w", err)
		}
	}
	return out, nil
}
