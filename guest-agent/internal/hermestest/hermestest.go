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
	"os/exec"
	"path/filepath"
	"testing"
)

// TreesEnv names a directory of exports of the real Hermes commits the gate
// supports or refuses, v0.16.0, v0.17.0, v0.18.2 and v0.19.0, as
// scripts/export-hermes-trees.sh lays them out (CI unpacks them from
// ../shared/hermes-trees). PythonEnv names an interpreter with the modules
// Hermes' own code imports there (httpx, requests); python3 otherwise.
const (
	TreesEnv  = "HERMES_BOX_HERMES_TREES"
	PythonEnv = "HERMES_BOX_HERMES_PYTHON"
)

// RealTree is the export of Hermes version under TreesEnv. Without it the
// test skips, except in CI (CI=true), where a missing tree fails it.
func RealTree(t testing.TB, version string) string {
	t.Helper()
	root := os.Getenv(TreesEnv)
	if root == "" {
		missing(t, TreesEnv+" is unset: no exported Hermes trees (export them with scripts/export-hermes-trees.sh)")
	}
	dir := filepath.Join(root, "v"+version)
	if _, err := os.Stat(filepath.Join(dir, "pyproject.toml")); err != nil {
		t.Fatalf("%s names %s, which holds no Hermes %s tree: %v", TreesEnv, root, version, err)
	}
	return dir
}

// Python is the interpreter the real-tree tests run Hermes with: PythonEnv,
// or python3 from PATH (skipping without one, failing in CI).
func Python(t testing.TB) string {
	t.Helper()
	if python := os.Getenv(PythonEnv); python != "" {
		return python
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		missing(t, "python3 not installed")
	}
	return python
}

// missing skips the test for a missing prerequisite, or fails it in CI.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("CI needs it: " + why)
	}
	t.Skip(why)
}

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
