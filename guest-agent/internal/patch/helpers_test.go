package patch

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

var (
	v16 = release("0.16.0")
	v17 = release("0.17.0")
	v19 = release("0.19.0")
)

func release(version string) pins.HermesRelease {
	h, err := pins.HermesByVersion(version)
	if err != nil {
		panic(err)
	}
	return h
}

// fixtureTree writes a small Hermes-shaped tree for rel into a temp dir:
// the fixture files, pyproject.toml and a detached .git/HEAD.
func fixtureTree(t testing.TB, rel pins.HermesRelease) string {
	t.Helper()
	dir := hermestest.CopyTree(t, hermestest.PatchTree)
	writeFile(t, dir, "pyproject.toml", "[build-system]\nrequires = [\"setuptools\"]\n\n[project]\nname = \"hermes-agent\"\nversion = \""+rel.Version+"\"\n")
	writeFile(t, dir, ".git/HEAD", rel.Commit+"\n")
	return dir
}

// fixtureTree019 is the gate package's excerpt of Hermes 0.19.0 with a
// detached .git/HEAD at its commit.
func fixtureTree019(t testing.TB) string {
	t.Helper()
	dir := hermestest.CopyTree(t, hermestest.GateExcerpt("0.19.0"))
	writeFile(t, dir, ".git/HEAD", v19.Commit+"\n")
	return dir
}

var writeFile = hermestest.WriteFile

func readFile(t testing.TB, dir, rel string) []byte {
	t.Helper()
	return []byte(hermestest.ReadFile(t, dir, rel))
}

// snapshot maps every file in dir to its mode and content.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		m[filepath.ToSlash(rel)] = fi.Mode().String() + "\n" + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameSnapshot(t testing.TB, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s changed", k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
}

// fakeRunner records commands and returns err for each.
type fakeRunner struct {
	mu   sync.Mutex
	cmds []command.Command
	err  error
}

func (f *fakeRunner) Run(_ context.Context, c command.Command) (command.Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, c)
	return command.Output{}, f.err
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cmds)
}
