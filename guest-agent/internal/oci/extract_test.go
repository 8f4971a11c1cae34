package oci

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtractAppliesWhiteoutsAndSelection(t *testing.T) {
	layout := t.TempDir()
	descs := writeLayout(t, layout, executorLayers(t, "arm64", readTestdata(t, "fake-bun.sh"))...)
	dest := filepath.Join(t.TempDir(), "release")
	if err := Extract(t.Context(), layout, descs, dest, ExtractOptions{UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	checkExecutorTree(t, dest, "arm64")
}

func TestExtractRefusesNonEmptyDest(t *testing.T) {
	layout := t.TempDir()
	descs := writeLayout(t, layout, executorLayers(t, "arm64", "#!/bin/sh\n")...)
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
	descs := writeLayout(t, layout, executorLayers(t, "arm64", "#!/bin/sh\n")...)
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
	rule  Rule
}{
	{"absolute path", []ent{file("/outside/evil", "x")}, RuleAbsolute},
	{"dot-dot component", []ent{file("app/../../outside/evil", "x")}, RuleDotDot},
	{"dot-dot in the middle", []ent{file("app/a/../../../outside/evil", "x")}, RuleDotDot},
	{"through a symlink of the same layer", []ent{symlink("app/up", "../.."), file("app/up/outside/evil", "x")}, RuleThroughSymlink},
	{"through a symlink of a lower layer", []ent{file("app/lnk/outside/evil", "x")}, RuleThroughSymlink},
	{"through an absolute symlink", []ent{file("app/abs/evil", "x")}, RuleThroughSymlink},
	{"hardlink with dot-dot", []ent{hardlink("app/hl", "../outside/target")}, RuleHardlinkEscape},
	{"hardlink absolute", []ent{hardlink("app/hl", "/etc/passwd")}, RuleHardlinkEscape},
	{"hardlink through a symlink", []ent{hardlink("app/hl", "app/lnk/outside/target")}, RuleThroughSymlink},
	{"hardlink to nothing", []ent{hardlink("app/hl", "app/missing")}, RuleHardlinkTarget},
	{"character device", []ent{special("app/tty", tar.TypeChar)}, RuleDevice},
	{"block device", []ent{special("app/sda", tar.TypeBlock)}, RuleDevice},
	{"fifo", []ent{special("app/pipe", tar.TypeFifo)}, RuleFifo},
	{"whiteout of the parent", []ent{file("app/.wh...", "")}, RuleWhiteout},
	{"whiteout of nothing", []ent{file("app/.wh.", "")}, RuleWhiteout},
	{"whiteout with dot-dot", []ent{file("app/../.wh.outside", "")}, RuleDotDot},
	{"whiteout through a symlink", []ent{file("app/lnk/outside/.wh.target", "")}, RuleThroughSymlink},
	{"opaque whiteout through a symlink", []ent{file("app/lnk/outside/.wh..wh..opq", "")}, RuleThroughSymlink},
	{"nested whiteout marker", []ent{file("app/.wh..wh.plnk", "")}, RuleWhiteout},
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
			descs := writeLayout(t, layout, gzipBytes(t, tarBytes(t, base)), gzipBytes(t, tarBytes(t, tt.layer)))
			dest := filepath.Join(top, "work", "release")
			if err := os.Mkdir(filepath.Dir(dest), 0o755); err != nil {
				t.Fatal(err)
			}
			before := treeSnapshot(t, top, dest)
			err := Extract(t.Context(), layout, descs, dest, ExtractOptions{UID: -1, GID: -1})
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Rule != tt.rule || refused.Layer != 2 {
				t.Fatalf("got %v, want layer 2 refused for %q", err, tt.rule)
			}
			if after := treeSnapshot(t, top, dest); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("something outside the release dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestCheckerModelsReplacedSymlinks(t *testing.T) {
	tests := []struct {
		name   string
		layers [][]ent
		ok     bool
	}{
		{"symlink whited out in a later layer, then a dir", [][]ent{{symlink("app/l", "/")}, {file("app/.wh.l", ""), dir("app/l/"), file("app/l/f", "x")}}, true},
		{"symlink replaced by a dir in the same layer", [][]ent{{symlink("app/l", "/"), dir("app/l/"), file("app/l/f", "x")}}, true},
		{"opaque dir does not hide a same-layer symlink", [][]ent{{dir("app/"), symlink("app/l", "/"), file("app/.wh..wh..opq", ""), file("app/l/f", "x")}}, false},
		{"whiteout does not hide a same-layer symlink", [][]ent{{symlink("app/l", "/"), file("app/.wh.l", ""), file("app/l/f", "x")}}, false},
		{"dir replaced by a symlink", [][]ent{{dir("app/d/"), file("app/d/f", "x")}, {symlink("app/d", "/"), file("app/d/g", "x")}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChecker()
			var err error
			for _, l := range tt.layers {
				c.NextLayer()
				tr := tar.NewReader(bytes.NewReader(tarBytes(t, l)))
				for err == nil {
					var hdr *tar.Header
					if hdr, err = tr.Next(); err == nil {
						_, err = c.Check(hdr)
					}
				}
				if errors.Is(err, io.EOF) {
					err = nil
				} else {
					break
				}
			}
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// FuzzCheckLayer feeds arbitrary tar streams to the pre-check: it must never
// panic, and whatever it accepts has no absolute or ".." names, no device
// or fifo entries, and hardlinks that stay inside the root.
func FuzzCheckLayer(f *testing.F) {
	f.Add(tarBytes(f, []ent{dir("app/"), file("app/a", "x"), symlink("app/l", "/"), hardlink("app/h", "app/a")}))
	for _, c := range maliciousCases {
		f.Add(tarBytes(f, c.layer))
	}
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckLayer(bytes.NewReader(data)) != nil {
			return
		}
		tr := tar.NewReader(bytes.NewReader(data))
		for {
			hdr, err := tr.Next()
			if err != nil {
				return
			}
			for _, n := range []string{hdr.Name, hdr.Linkname} {
				if n == hdr.Linkname && hdr.Typeflag != tar.TypeLink {
					continue
				}
				if strings.HasPrefix(n, "/") || strings.Contains("/"+n+"/", "/../") {
					t.Fatalf("accepted unsafe name %q", n)
				}
			}
			switch hdr.Typeflag {
			case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
				t.Fatalf("accepted special file %q", hdr.Name)
			}
		}
	})
}
