//go:build !hbxrelease

// Package hermestest copies the Hermes fixture trees for the tests of the
// gate, patch and agent CLI packages: the patch package's tree (the lines
// 0.16/0.17's source patch relies on) and the gate package's excerpts of
// newer releases. The paths are relative to a test's working directory,
// which is its package's folder in guest-agent/internal.
package hermestest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// PatchTree is the patch package's fixture tree.
var PatchTree = filepath.Join("..", "patch", "testdata", "tree")

// GateExcerpt is the gate package's excerpt of Hermes version.
func GateExcerpt(version string) string {
	return filepath.Join("..", "gate", "testdata", "hermes-"+version)
}

// CopyTree copies the regular files under src into a new temp dir.
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteFile writes content to dir/rel (a slash path), making its parents.
func WriteFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns the content of dir/rel (a slash path).
func ReadFile(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
