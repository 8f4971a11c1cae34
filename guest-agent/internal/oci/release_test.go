package oci

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
)

// TestValidationFailureInstallsNothing: in either layout, a release whose
// bun build fails is neither installed nor activated.
func TestValidationFailureInstallsNothing(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	broken := readTestdata(t, "broken-bun.sh")
	for name, layers := range map[string][][]byte{
		"workspace": ocitest.ExecutorLayers(t, "arm64", broken),
		"packaged":  ocitest.PackagedExecutorLayers(t, "arm64", broken),
	} {
		t.Run(name, func(t *testing.T) {
			ref := push(t, reg, "executor/selfhost:broken-"+name, ocitest.Image(t, "linux", "arm64", layers), nil)
			s, _ := newStore(t, reg, "arm64")
			_, err := s.Install(t.Context(), ref)
			if err == nil || !strings.Contains(err.Error(), "Could not resolve") || !strings.Contains(err.Error(), name+" layout") {
				t.Fatalf("got %v, want the bun build failure of the %s layout", err, name)
			}
			ents, _ := os.ReadDir(filepath.Join(s.Root, "releases"))
			if len(ents) != 0 {
				t.Fatalf("releases/ holds %v after a failed validation", ents)
			}
			if _, err := os.Lstat(filepath.Join(s.Root, "current")); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("current exists")
			}
		})
	}
}

func TestLockReapsStaleTemporaries(t *testing.T) {
	s := &Store{Root: t.TempDir()}
	stale := []string{".validation-1", ".current-42", ".pull-config-7", "releases/.staging-3", "releases/.obsolete-9", ".oci-cache-ab/oci-put-blob123"}
	for _, p := range stale {
		if err := os.MkdirAll(filepath.Join(s.Root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(s.Root, ".oci-cache-ab", "blobs")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := s.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for _, p := range stale {
		if _, err := os.Lstat(filepath.Join(s.Root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not reaped", p)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("completed cache blobs reaped: %v", err)
	}
}

func TestActiveEntry(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	idx, imgs := ocitest.TwoArchIndex(t, readTestdata(t, "fake-bun.sh"))
	ref := push(t, reg, "executor/selfhost:v1", nil, idx)
	s, _ := newStore(t, reg, "arm64")
	if _, err := ActiveEntry(s.Root); err == nil {
		t.Fatal("an entry without a release")
	}
	if _, err := s.Install(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	got, err := ActiveEntry(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join(s.Root, "releases", strings.TrimPrefix(ocitest.ImageDigest(t, imgs["arm64"]), "sha256:"))
	want := Entry{
		Command: []string{rel + "/usr/local/bin/bun", "run", "src/serve.ts"},
		Dir:     rel + "/app/apps/host-selfhost",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestParseReference(t *testing.T) {
	d := strings.Repeat("ab", 32)
	tests := []struct {
		in, canonical, err string
	}{
		{"ghcr.io/o/executor-selfhost:v1.5.12@sha256:" + d, "ghcr.io/o/executor-selfhost@sha256:" + d, ""},
		{"ghcr.io/usefulsoftwareco/executor-selfhost:v1.5.35@sha256:" + d, "ghcr.io/usefulsoftwareco/executor-selfhost@sha256:" + d, ""},
		{"127.0.0.1:5000/a/b:t@sha256:" + d, "127.0.0.1:5000/a/b@sha256:" + d, ""},
		{"ghcr.io/o/x@sha256:" + d, "", "REGISTRY/REPOSITORY:TAG"},
		{"ghcr.io/o/x:v1", "", "@sha256"},
		{"ghcr.io/o/x:v1@sha256:" + strings.ToUpper(d), "", "@sha256"},
		{"x:v1@sha256:" + d, "", "REGISTRY/REPOSITORY:TAG"},
		{"ghcr.io/o/x:v 1@sha256:" + d, "", "whitespace"},
	}
	for _, tt := range tests {
		r, err := ParseReference(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || r.Canonical() != tt.canonical || r.String() != tt.in {
			t.Errorf("%s: got %+v %v", tt.in, r, err)
		}
	}
}
