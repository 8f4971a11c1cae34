package tests

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/hermes-box/hermes-box"

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// deps lists "package: dependency" pairs for every package matching pattern.
func deps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, pattern)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		m[f[0]] = f[1:]
	}
	return m
}

// isStd reports whether an import path belongs to the standard library.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestEveryPackageHasADocComment(t *testing.T) {
	root := moduleRoot(t)
	docs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		docs[dir] = docs[dir] || f.Doc != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range docs {
		if !ok {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("package in %s has no doc comment", rel)
		}
	}
}

// TestReleaseBuildsLinkNoTestSupport: the release binaries, listed with the
// release build's tag, depend on no package that only tests use; those
// packages are excluded by that tag, so importing one would break the build.
func TestReleaseBuildsLinkNoTestSupport(t *testing.T) {
	mains := []string{"./host", "./guest-agent", "./guest-agent/cmd/hermes-box-agent-oci"}
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps", "-tags", "hbxrelease"}, mains...)...)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list of the release builds: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, mod+"/") && (strings.HasSuffix(p, "test") || strings.HasPrefix(p, mod+"/tests/")) {
			t.Errorf("a release binary links the test-support package %s", p)
		}
	}
}
