package oci

import (
	"archive/tar"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs/tarfstest"
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
	rule  tarfs.Rule
}{
	{"absolute path", []ent{file("/outside/evil", "x")}, tarfs.RuleAbsolute},
	{"dot-dot component", []ent{file("app/../../outside/evil", "x")}, tarfs.RuleDotDot},
	{"dot-dot in the middle", []ent{file("app/a/../../../outside/evil", "x")}, tarfs.RuleDotDot},
	{"through a symlink of the same layer", []ent{symlink("app/up", "../.."), file("app/up/outside/evil", "x")}, tarfs.RuleThroughSymlink},
	{"through a symlink of a lower layer", []ent{file("app/lnk/outside/evil", "x")}, tarfs.RuleThroughSymlink},
	{"through an absolute symlink", []ent{file("app/abs/evil", "x")}, tarfs.RuleThroughSymlink},
	{"hardlink with dot-dot", []ent{hardlink("app/hl", "../outside/target")}, tarfs.RuleHardlinkEscape},
	{"hardlink absolute", []ent{hardlink("app/hl", "/etc/passwd")}, tarfs.RuleHardlinkEscape},
	{"hardlink through a symlink", []ent{hardlink("app/hl", "app/lnk/outside/target")}, tarfs.RuleThroughSymlink},
	{"hardlink to nothing", []ent{hardlink("app/hl", "app/missing")}, tarfs.RuleHardlinkTarget},
	{"character device", []ent{special("app/tty", tar.TypeChar)}, tarfs.RuleDevice},
	{"block device", []ent{special("app/sda", tar.TypeBlock)}, tarfs.RuleDevice},
	{"fifo", []ent{special("app/pipe", tar.TypeFifo)}, tarfs.RuleFifo},
	{"whiteout of the parent", []ent{file("app/.wh...", "")}, tarfs.RuleWhiteout},
	{"whiteout of nothing", []ent{file("app/.wh.", "")}, tarfs.RuleWhiteout},
	{"whiteout with dot-dot", []ent{file("app/../.wh.outside", "")}, tarfs.RuleDotDot},
	{"whiteout through a symlink", []ent{file("app/lnk/outside/.wh.target", "")}, tarfs.RuleThroughSymlink},
	{"opaque whiteout through a symlink", []ent{file("app/lnk/outside/.wh..wh..opq", "")}, tarfs.RuleThroughSymlink},
	{"nested whiteout marker", []ent{file("app/.wh..wh.plnk", "")}, tarfs.RuleWhiteout},
	{"through a hardlink to a symlink", []ent{hardlink("app/hl", "app/lnk"), file("app/hl/outside/evil", "x")}, tarfs.RuleThroughSymlink},
	{"hardlink through a hardlink to a symlink", []ent{hardlink("app/hl", "app/abs"), hardlink("app/h2", "app/hl/outside/target")}, tarfs.RuleThroughSymlink},
	{"kept symlink on the selected path", []ent{symlink("usr", "../outside")}, tarfs.RuleSelectedDir},
	{"kept symlink deeper on the selected path", []ent{dir("usr/"), dir("usr/local/"), symlink("usr/local/bin", "/")}, tarfs.RuleSelectedDir},
	{"selected directory replaced by a symlink", []ent{symlink("app", "../outside")}, tarfs.RuleSelectedDir},
	{"selected directory made a hardlink to a symlink", []ent{dir("usr/"), hardlink("usr/local", "app/lnk")}, tarfs.RuleSelectedDir},
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
			var refused *tarfs.RefusedError
			if !errors.As(err, &refused) || refused.Rule != tt.rule || refused.Layer != 2 {
				t.Fatalf("got %v, want layer 2 refused for %q", err, tt.rule)
			}
			if after := treeSnapshot(t, top, dest); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("something outside the release dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestExtractMatchesGNUTar compares the unpack of a small image shaped
// like Executor's (every path selected) with GNU tar's extraction of the
// same layers, whiteouts applied: paths, types, modes, times, contents,
// symlink targets and hard links.
func TestExtractMatchesGNUTar(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("GNU tar not found")
		}
		t.Skip("GNU tar not found")
	}
	top := t.TempDir()
	ls, err := tarfstest.Scaled(top, 0.03)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := tarfstest.Blobs(ls)
	if err != nil {
		t.Fatal(err)
	}
	descs := writeLayout(t, filepath.Join(top, "layout"), blobs...)
	got := filepath.Join(top, "agent")
	if err := Extract(t.Context(), filepath.Join(top, "layout"), descs, got, ExtractOptions{Keep: tarfs.SelectAll, UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(top, "tar")
	if err := os.Mkdir(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tarfstest.TarReference(t.Context(), tarBin, tarfstest.Layers(ls), want); err != nil {
		t.Fatal(err)
	}
	if err := tarfstest.CompareTrees(want, got); err != nil {
		t.Fatal(err)
	}
}

// TestExtractRootless runs the extraction test again as an unprivileged
// user (files given to the unprivileged user, as umoci's rootless mode did).
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
		"-test.run", "^(TestExtractAppliesWhiteoutsAndSelection|TestMaliciousLayerCorpus|TestExtractMatchesGNUTar)$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestExtractAppliesWhiteoutsAndSelection") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}
