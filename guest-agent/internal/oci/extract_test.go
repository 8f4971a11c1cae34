package oci

import (
	"archive/tar"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/layercheck"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
)

func TestExtractAppliesWhiteoutsAndSelection(t *testing.T) {
	layout := t.TempDir()
	descs := writeLayout(t, layout, ocitest.ExecutorLayers(t, "arm64", readTestdata(t, "fake-bun.sh"))...)
	dest := filepath.Join(t.TempDir(), "release")
	if err := Extract(t.Context(), layout, descs, dest, ExtractOptions{UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	checkExecutorTree(t, dest, "arm64")
}

func TestExtractRefusesNonEmptyDest(t *testing.T) {
	layout := t.TempDir()
	descs := writeLayout(t, layout, ocitest.ExecutorLayers(t, "arm64", "#!/bin/sh\n")...)
	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Extract(t.Context(), layout, descs, dest, ExtractOptions{UID: -1, GID: -1}); err == nil {
		t.Fatal("extracted into a non-empty directory")
	}
}

func TestExtractRefusesWrongDigestOrSize(t *testing.T) {
	layout := t.TempDir()
	descs := writeLayout(t, layout, ocitest.ExecutorLayers(t, "arm64", "#!/bin/sh\n")...)
	bad := descs[1]
	path, _ := blobPath(layout, string(bad.Digest))
	b, _ := os.ReadFile(path)
	b[len(b)-9] ^= 1 // the gzip trailer's CRC: the tar itself still reads
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Extract(t.Context(), layout, descs, filepath.Join(t.TempDir(), "r"), ExtractOptions{UID: -1, GID: -1})
	if err == nil || !strings.Contains(err.Error(), "layer 2") {
		t.Fatalf("got %v, want layer 2 refused", err)
	}
	descs[0].Size++
	err = Extract(t.Context(), layout, descs, filepath.Join(t.TempDir(), "r"), ExtractOptions{UID: -1, GID: -1})
	if err == nil || !strings.Contains(err.Error(), "size") {
		t.Fatalf("got %v, want a size refusal", err)
	}
}

// maliciousCases has one case per pre-check rule (and a few variants), each
// a layer of its own on top of a benign base layer.
var maliciousCases = []struct {
	name  string
	layer []ent
	rule  layercheck.Rule
}{
	{"absolute path", []ent{file("/outside/evil", "x")}, layercheck.RuleAbsolute},
	{"dot-dot component", []ent{file("app/../../outside/evil", "x")}, layercheck.RuleDotDot},
	{"dot-dot in the middle", []ent{file("app/a/../../../outside/evil", "x")}, layercheck.RuleDotDot},
	{"through a symlink of the same layer", []ent{symlink("app/up", "../.."), file("app/up/outside/evil", "x")}, layercheck.RuleThroughSymlink},
	{"through a symlink of a lower layer", []ent{file("app/lnk/outside/evil", "x")}, layercheck.RuleThroughSymlink},
	{"through an absolute symlink", []ent{file("app/abs/evil", "x")}, layercheck.RuleThroughSymlink},
	{"hardlink with dot-dot", []ent{hardlink("app/hl", "../outside/target")}, layercheck.RuleHardlinkEscape},
	{"hardlink absolute", []ent{hardlink("app/hl", "/etc/passwd")}, layercheck.RuleHardlinkEscape},
	{"hardlink through a symlink", []ent{hardlink("app/hl", "app/lnk/outside/target")}, layercheck.RuleThroughSymlink},
	{"hardlink to nothing", []ent{hardlink("app/hl", "app/missing")}, layercheck.RuleHardlinkTarget},
	{"character device", []ent{special("app/tty", tar.TypeChar)}, layercheck.RuleDevice},
	{"block device", []ent{special("app/sda", tar.TypeBlock)}, layercheck.RuleDevice},
	{"fifo", []ent{special("app/pipe", tar.TypeFifo)}, layercheck.RuleFifo},
	{"whiteout of the parent", []ent{file("app/.wh...", "")}, layercheck.RuleWhiteout},
	{"whiteout of nothing", []ent{file("app/.wh.", "")}, layercheck.RuleWhiteout},
	{"whiteout with dot-dot", []ent{file("app/../.wh.outside", "")}, layercheck.RuleDotDot},
	{"whiteout through a symlink", []ent{file("app/lnk/outside/.wh.target", "")}, layercheck.RuleThroughSymlink},
	{"opaque whiteout through a symlink", []ent{file("app/lnk/outside/.wh..wh..opq", "")}, layercheck.RuleThroughSymlink},
	{"nested whiteout marker", []ent{file("app/.wh..wh.plnk", "")}, layercheck.RuleWhiteout},
}

func TestMaliciousLayerCorpus(t *testing.T) {
	base := []ent{dir("app/"), file("app/keep", "k"), symlink("app/lnk", "../.."), symlink("app/abs", "/")}
	for _, tt := range maliciousCases {
		t.Run(tt.name, func(t *testing.T) {
			top := t.TempDir()
			outside := filepath.Join(top, "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "target"), []byte("must survive"), 0o644); err != nil {
				t.Fatal(err)
			}
			layout := filepath.Join(top, "layout")
			descs := writeLayout(t, layout, tartest.Gzip(t, tartest.Tar(t, base)), tartest.Gzip(t, tartest.Tar(t, tt.layer)))
			dest := filepath.Join(top, "work", "release")
			if err := os.Mkdir(filepath.Dir(dest), 0o755); err != nil {
				t.Fatal(err)
			}
			before := treeSnapshot(t, top, dest)
			err := Extract(t.Context(), layout, descs, dest, ExtractOptions{UID: -1, GID: -1})
			var refused *layercheck.RefusedError
			if !errors.As(err, &refused) || refused.Rule != tt.rule || refused.Layer != 2 {
				t.Fatalf("got %v, want layer 2 refused for %q", err, tt.rule)
			}
			if after := treeSnapshot(t, top, dest); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("something outside the release dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestExtractRootless runs the extraction test again as an unprivileged
// user (umoci's rootless mode with the explicit one-entry id map).
func TestExtractRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: every extraction test here runs rootless")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("setpriv (util-linux) not found")
		}
		t.Skip("setpriv (util-linux) not found")
	}
	dir, err := os.MkdirTemp("", "oci-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "oci.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil || os.Chmod(dir, 0o777) != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run", "^(TestExtractAppliesWhiteoutsAndSelection|TestMaliciousLayerCorpus)$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestExtractAppliesWhiteoutsAndSelection") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}
