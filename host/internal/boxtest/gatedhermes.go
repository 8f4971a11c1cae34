//go:build !hbxrelease

package boxtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// The box a project provisions has the approval gate installed on the real
// Hermes tree of the default pinned release, so that the real agent's gate
// check (Hermes' own code asked for its effective mode) passes as in a
// provisioned box: the test agent's provision copies this overlay into the
// builder (tests/testagent, GatedHermesEnv).
var (
	gatedOnce sync.Once
	gatedDir  string
	gatedErr  error
)

// GatedHermesEnv is the test agent's variable naming the overlay; a test
// that sets it empty (Project.Extra) builds a box without the gate.
const GatedHermesEnv = "TESTAGENT_GATED_HERMES"

// errNoTree is a machine without the real Hermes tree (test data kept
// beside the clone, never committed).
var errNoTree = errors.New("no real Hermes tree")

// GatedHermes returns the overlay root, made once per test binary: the
// real tree at usr/local/lib/hermes-agent (with a venv whose python is this
// machine's, and a discord stand-in as the test agent's tools have), patched
// by the real agent's `patch hermes` verb, which also installs the plugin
// and writes the managed scope at etc/hermes. Without the tree the test
// skips, except in CI, where it fails.
func GatedHermes(t testing.TB) string {
	t.Helper()
	gatedOnce.Do(func() { gatedDir, gatedErr = prepareGatedHermes(t) })
	if errors.Is(gatedErr, errNoTree) && os.Getenv("CI") != "true" {
		t.Skip(gatedErr)
	}
	if gatedErr != nil {
		t.Fatal(gatedErr)
	}
	return gatedDir
}

func prepareGatedHermes(t testing.TB) (string, error) {
	rel, err := pins.Hermes(pins.DefaultHermesCommit)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(Build(t).Dir, "gated-hermes")
	tree := filepath.Join(dir, filepath.FromSlash(boxlayout.HermesTree))
	if err := placeTree(t, rel.Version, tree); err != nil {
		return "", err
	}
	commit, err := os.ReadFile(filepath.Join(tree, ".commit"))
	if err != nil {
		return "", err
	}
	python := os.Getenv("HERMES_BOX_HERMES_PYTHON")
	if python == "" {
		if python, err = exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("%w: python3 is not installed", errNoTree)
		}
	}
	venv := map[string]string{
		".hermes-box-source": "commit=" + strings.TrimSpace(string(commit)) + "\n",
		"venv/bin/python": "#!/bin/sh\n# The venv's interpreter: this machine's Python with the venv's packages.\n" +
			"export PYTHONPATH=\"$(dirname \"$0\")/../lib/site-packages${PYTHONPATH:+:$PYTHONPATH}\"\nexec " + python + " \"$@\"\n",
		"venv/lib/site-packages/discord/__init__.py": "\"\"\"Stand-in for discord.py: importable, nothing more.\"\"\"\n",
	}
	for name, body := range venv {
		p := filepath.Join(tree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, Build(t).Agent, "--root", dir, "patch", "hermes", "--commit", rel.Commit,
		"--config", filepath.Join(t.TempDir(), "config.yaml"), "--no-integration").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("installing the gate on Hermes %s: %v\n%s", rel.Version, err, out)
	}
	return dir, nil
}

// placeTree puts the real tree of version at dst: HERMES_GATE_TREE_0190 or
// HERMES_BOX_HERMES_TREES/v<version> when set (CI unpacks them), else
// ../shared/hermes-trees/v<version>.tar.gz beside the clone.
func placeTree(t testing.TB, version, dst string) error {
	src := os.Getenv("HERMES_BOX_HERMES_TREES")
	if src != "" {
		src = filepath.Join(src, "v"+version)
	}
	if d := os.Getenv("HERMES_GATE_TREE_0190"); d != "" && version == "0.19.0" {
		src = d
	}
	if src != "" {
		return os.CopyFS(dst, os.DirFS(src))
	}
	tgz := filepath.Join(sshdtest.ModuleRoot(t), "..", "shared", "hermes-trees", "v"+version+".tar.gz")
	if _, err := os.Stat(tgz); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: set HERMES_BOX_HERMES_TREES or keep %s beside the clone", errNoTree, tgz)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", tgz, "-C", dst, "--strip-components=1").CombinedOutput(); err != nil {
		return fmt.Errorf("unpacking %s: %v\n%s", tgz, err, out)
	}
	return nil
}
