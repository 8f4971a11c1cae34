package box

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/config"
)

// TestRuntimeCreatePublishesExecutor: with Executor enabled the runtime's
// create publishes its port on 4788 and passes the three settings the
// box's boot reads (reference hermes-box.md §2.1 and §2.3).
func TestRuntimeCreatePublishesExecutor(t *testing.T) {
	root := t.TempDir()
	image := "ghcr.io/rhyssullivan/executor-selfhost:v1.5.16@sha256:" + strings.Repeat("5", 64)
	conf := "HERMES_BOX_SSH_PORT=2222\nHERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=14788\nHERMES_BOX_EXECUTOR_IMAGE=" + image + "\n"
	if err := os.WriteFile(filepath.Join(root, "hermes-box.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	args, err := runtimeSpec((&Box{cfg: cfg}), "/images/base.smolmachine").Args()
	if err != nil {
		t.Fatal(err)
	}
	got := " " + strings.Join(args, " ") + " "
	for _, want := range []string{" -p 2222:22 ", " -p 14788:4788 ", " -e HERMES_BOX_EXECUTOR_ENABLED=true ",
		" -e HERMES_BOX_EXECUTOR_IMAGE=" + image + " ", " -e HERMES_BOX_EXECUTOR_HOST_PORT=14788 "} {
		if !strings.Contains(got, want) {
			t.Errorf("runtime create %q lacks %q", got, want)
		}
	}
}
