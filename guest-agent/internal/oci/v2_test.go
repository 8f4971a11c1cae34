package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
)

// TestExecutorV2RefusedByName: an image laid out as Executor v2 is refused
// by name from its config, before any layer is fetched, and nothing is
// installed; a release holding v2's entry is named too.
func TestExecutorV2RefusedByName(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	img := ocitest.ExecutorV2Image(t, "arm64")
	ref := push(t, reg, "usefulsoftwareco/executor-selfhost:beta-1234567", img, nil)
	s, _ := newStore(t, reg, "arm64")
	_, err := s.Install(t.Context(), ref)
	if !errors.Is(err, ErrExecutorV2) || !strings.Contains(err.Error(), "Executor v2 is not supported yet; pin a v1 image: the image is laid out as Executor v2 (a node command, port 4400, EXECUTOR_DATA_DIR=/app/data)") {
		t.Fatalf("install of a v2 image: %v", err)
	}
	for _, d := range ocitest.LayerDigests(t, img) {
		if n := reg.BlobGets(d); n != 0 {
			t.Errorf("layer %s fetched %d times before the refusal", d, n)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.Root, "current")); !errors.Is(err, os.ErrNotExist) {
		t.Error("current was created for a v2 image")
	}

	// Its files, extracted with the v1 selection, are named too.
	dir := writeTree(t, map[string]string{"app/apps/hosted/self-host/dist/main.mjs": "x", "app/data/": "", "app/package.json": `{"name":"executor"}`})
	if err := CheckPayload(dir); !errors.Is(err, ErrExecutorV2) {
		t.Errorf("payload check of a v2 tree: %v", err)
	}
	// A v1 image's config has no sign of v2.
	v1cfg, err := ocitest.ExecutorImage(t, "arm64", "#!/bin/sh\n").RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNotV2(v1cfg); err != nil {
		t.Errorf("a v1 config: %v", err)
	}
}
