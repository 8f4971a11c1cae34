package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/pins"
)

func gateTarget(root string) provision.GateTarget {
	return provision.GateTarget{Root: root, Source: "/usr/local/lib/hermes-agent", Config: "/workspace/hermes-home/config.yaml", Commit: pins.DefaultHermesCommit}
}

func TestGatePatcherPendingOnFreshRoot(t *testing.T) {
	root := t.TempDir()
	pending, err := newGatePatcher().Pending(context.Background(), gateTarget(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 5 || !strings.Contains(pending[0], "edit the Hermes 0.19.0 source") ||
		!strings.Contains(pending[1], "gate plugin") || !strings.Contains(pending[2], "seed") ||
		!strings.Contains(pending[3], "managed scope "+filepath.Join(root, "etc/hermes/config.yaml")) ||
		!strings.Contains(pending[4], "record the managed directory "+filepath.Join(root, "etc/hermes")) {
		t.Fatalf("pending %q", pending)
	}
}

// TestGatePatcherRefusesUnknownTree shows a tree that is not the pinned
// Hermes is refused and left as it was, and the config is not seeded.
func TestGatePatcherRefusesUnknownTree(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "usr/local/lib/hermes-agent")
	if err := os.MkdirAll(filepath.Join(src, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "pyproject.toml"), []byte("[project]\nversion = \"9.9.9\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := newGatePatcher().Apply(context.Background(), gateTarget(root))
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("got %v, want a refusal naming the missing commit", err)
	}
	ents, _ := os.ReadDir(src)
	if len(ents) != 2 {
		t.Fatalf("the refused tree was changed: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(root, "workspace/hermes-home/config.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("config seeded for a refused tree: %v", err)
	}
}
