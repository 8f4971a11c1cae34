package gate

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// copyTree copies src into a new temp dir.
func copyTree(t testing.TB, src string) string {
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

// fixture returns a small tree holding the lines version's mechanism relies
// on: the gate's own excerpt for 0.19.0, the patch package's for 0.16/0.17,
// a bare pyproject for anything else.
func fixture(t testing.TB, version string) string {
	t.Helper()
	switch version {
	case "0.19.0", "0.18.2":
		return copyTree(t, filepath.Join("testdata", "hermes-"+version))
	}
	dir := copyTree(t, filepath.Join("..", "patch", "testdata", "tree"))
	write(t, dir, "pyproject.toml", "[project]\nname = \"hermes-agent\"\nversion = \""+version+"\"\n")
	return dir
}

func write(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func release(t testing.TB, version string) pins.HermesRelease {
	t.Helper()
	h, err := pins.HermesByVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// realTrees is the directory named by HermesTreesEnv, holding git-archive
// exports v0.16.0, v0.17.0, v0.18.2 and v0.19.0 (scripts/export-hermes-trees.sh);
// tests that need them skip with the reason when it is unset (CI cannot
// fetch Hermes).
const HermesTreesEnv = "HERMES_BOX_HERMES_TREES"

func realTree(t *testing.T, version string) string {
	t.Helper()
	root := os.Getenv(HermesTreesEnv)
	if root == "" {
		t.Skipf("%s is unset: no exported Hermes trees (export them with scripts/export-hermes-trees.sh)", HermesTreesEnv)
	}
	dir := filepath.Join(root, "v"+version)
	if _, err := os.Stat(filepath.Join(dir, "pyproject.toml")); err != nil {
		t.Fatalf("%s names %s, which holds no Hermes %s tree: %v", HermesTreesEnv, root, version, err)
	}
	return dir
}

// alter changes one byte of the first occurrence of text in file.
func alter(t testing.TB, dir, file, text string) {
	t.Helper()
	src := read(t, dir, file)
	i := strings.Index(src, text)
	if i < 0 {
		t.Fatalf("%s does not hold %q", file, text)
	}
	j := i + len(text)/2
	for src[j] == ' ' || src[j] == '\n' {
		j++
	}
	write(t, dir, file, src[:j]+"\x7f"+src[j+1:])
}
