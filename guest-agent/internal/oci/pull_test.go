package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
)

// newStore returns a store under a temp runtime root that pulls from reg.
func newStore(t *testing.T, reg *ocitest.Registry, arch string) (*Store, *recordEvents) {
	t.Helper()
	ev := &recordEvents{}
	return &Store{
		Root: filepath.Join(t.TempDir(), "runtime"),
		PullOptions: PullOptions{
			Platform:     Platform{OS: "linux", Architecture: arch},
			CertDir:      reg.CADir(),
			StallTimeout: 5 * time.Second,
			Events:       ev,
		},
		UID: -1, GID: -1,
		LockTimeout: 5 * time.Second,
	}, ev
}

func readLink(t *testing.T, path string) string {
	t.Helper()
	target, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestRoundTripTwoArchIndex(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	idx, imgs := ocitest.TwoArchIndex(t, readTestdata(t, "fake-bun.sh"))
	ref := push(t, reg, "rhyssullivan/executor-selfhost:v1.0.0", nil, idx)
	for _, arch := range []string{"arm64", "amd64"} {
		t.Run(arch, func(t *testing.T) {
			s, ev := newStore(t, reg, arch)
			r, err := s.Install(t.Context(), ref)
			if err != nil {
				t.Fatal(err)
			}
			want := ocitest.ImageDigest(t, imgs[arch])
			if r.ManifestDigest != want || r.RepositoryDigest != ref.Canonical() || r.ImageReference != ref.String() {
				t.Fatalf("release %+v; want manifest %s of %s", r, want, ref)
			}
			if got := readLink(t, filepath.Join(s.Root, "current")); got != "releases/"+strings.TrimPrefix(want, "sha256:") {
				t.Fatalf("current -> %q", got)
			}
			checkExecutorTree(t, filepath.Join(s.Root, "current"), arch)
			if !ev.has("progress:blob done") || !ev.has("activated") {
				t.Errorf("events %v lack progress or activation", ev.evs)
			}
			leftovers, _ := filepath.Glob(filepath.Join(s.Root, ".*-*"))
			staging, _ := filepath.Glob(filepath.Join(s.Root, "releases", ".*"))
			if len(leftovers)+len(staging) > 0 {
				t.Errorf("temporaries left: %v %v", leftovers, staging)
			}
		})
	}
}

// checkExecutorTree checks what ocitest.ExecutorLayers leaves after extraction.
func checkExecutorTree(t *testing.T, root, arch string) {
	t.Helper()
	mustRead := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return string(b)
	}
	if got := mustRead("app/arch.txt"); got != arch {
		t.Errorf("app/arch.txt = %q, want %q", got, arch)
	}
	if got := mustRead("app/node_modules/cached.js"); got != "module.exports = 1\n" {
		t.Errorf("hardlink to a path outside app/ not materialized: %q", got)
	}
	if got := mustRead("app/cache/new"); got == "" {
		t.Error("app/cache/new missing")
	}
	for _, gone := range []string{"app/stale.txt", "app/cache/old", "etc", "root", "usr/local/bin/bunx", "app/cache/.wh..wh..opq", "app/.wh.stale.txt"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); whiteouts or selection not applied", gone, err)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "app/setuid"))
	if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		t.Errorf("app/setuid: %v %v; set-id bits must be dropped", fi, err)
	}
	if err := CheckPayload(root); err != nil {
		t.Error(err)
	}
}

func TestTagOnlyChangeReusesRelease(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	idx, imgs := ocitest.TwoArchIndex(t, readTestdata(t, "fake-bun.sh"))
	ref := push(t, reg, "executor/selfhost:v1", nil, idx)
	s, _ := newStore(t, reg, "arm64")
	if _, err := s.Install(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	layer := ocitest.LayerDigests(t, imgs["arm64"])[1]
	before := reg.BlobGets(layer)
	retagged := ref
	retagged.Tag = "latest"
	r, err := s.Install(t.Context(), retagged)
	if err != nil {
		t.Fatal(err)
	}
	if reg.BlobGets(layer) != before {
		t.Error("a tag-only change downloaded the image again")
	}
	if r.ImageReference != retagged.String() {
		t.Errorf("image reference %q, want %q", r.ImageReference, retagged.String())
	}
}

func TestWrongArchSingleImageRefused(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	img := ocitest.Image(t, "linux", "amd64", ocitest.ExecutorLayers(t, "amd64", readTestdata(t, "fake-bun.sh")))
	ref := push(t, reg, "executor/selfhost:amd64-only", img, nil)
	s, _ := newStore(t, reg, "arm64")
	_, err := s.Install(t.Context(), ref)
	if err == nil || !strings.Contains(err.Error(), "is for linux/amd64, this box needs linux/arm64") {
		t.Fatalf("got %v, want a refusal naming both platforms", err)
	}
	if _, err := os.Lstat(filepath.Join(s.Root, "current")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("current was created for a wrong-arch image")
	}
}

func TestCorruptBlobRefusedAndCurrentUntouched(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	bun := readTestdata(t, "fake-bun.sh")
	good := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64", bun))
	goodRef := push(t, reg, "executor/selfhost:v1", good, nil)
	s, _ := newStore(t, reg, "arm64")
	if _, err := s.Install(t.Context(), goodRef); err != nil {
		t.Fatal(err)
	}
	link := readLink(t, filepath.Join(s.Root, "current"))
	before := treeSnapshot(t, filepath.Join(s.Root, "releases"))

	bad := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64-v2", bun))
	badRef := push(t, reg, "executor/selfhost:v2", bad, nil)
	reg.SetFault(ocitest.LayerDigests(t, bad)[1], ocitest.FaultCorrupt)
	_, err := s.Install(t.Context(), badRef)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "digest") {
		t.Fatalf("got %v, want a digest refusal", err)
	}
	if got := readLink(t, filepath.Join(s.Root, "current")); got != link {
		t.Fatalf("current moved to %q", got)
	}
	if after := treeSnapshot(t, filepath.Join(s.Root, "releases")); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("releases changed:\n%v\n%v", before, after)
	}
}

func TestStallDeadline(t *testing.T) {
	bun := readTestdata(t, "fake-bun.sh")
	tests := []struct {
		name    string
		fault   ocitest.Fault
		wantErr bool
	}{
		{"stalled server is stopped", ocitest.FaultStall, true},
		{"slow server completes", ocitest.FaultSlow, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := ocitest.NewRegistry(t, nil)
			img := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64", bun+"# "+randomHex(t, 128<<10)+"\n"))
			ref := push(t, reg, "executor/selfhost:v1", img, nil)
			layer := ocitest.LayerDigests(t, img)[0]
			reg.SetFault(layer, tt.fault)
			s, _ := newStore(t, reg, "arm64")
			s.PullOptions.StallTimeout = time.Second
			start := time.Now()
			_, err := s.Pull(t.Context(), ref)
			elapsed := time.Since(start)
			if tt.wantErr {
				if !errors.Is(err, ErrStalled) {
					t.Fatalf("got %v, want ErrStalled", err)
				}
				if elapsed > 10*time.Second {
					t.Fatalf("stall detected only after %s", elapsed)
				}
				return
			}
			if err != nil {
				t.Fatalf("slow pull failed after %s: %v", elapsed, err)
			}
			if elapsed < 2*s.PullOptions.StallTimeout {
				t.Fatalf("the slow blob took only %s; the test does not show a pull outliving the stall timeout", elapsed)
			}
		})
	}
}

// randomHex returns n hex digits of random data: it compresses only to half.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestFailedPullKeepsCompletedBlobs(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	img := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64", readTestdata(t, "fake-bun.sh")))
	ref := push(t, reg, "executor/selfhost:v1", img, nil)
	layers := ocitest.LayerDigests(t, img)
	reg.SetFault(layers[2], ocitest.FaultStall)
	s, _ := newStore(t, reg, "arm64")
	s.PullOptions.StallTimeout = time.Second
	if _, err := s.Pull(t.Context(), ref); !errors.Is(err, ErrStalled) {
		t.Fatalf("first attempt: %v, want ErrStalled", err)
	}
	firstGets := reg.BlobGets(layers[0])
	reg.SetFault(layers[2], ocitest.FaultNone)
	if _, err := s.Pull(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if got := reg.BlobGets(layers[0]); got != firstGets {
		t.Fatalf("layer 1 fetched %d times after the retry, %d before: the cache was not reused", got, firstGets)
	}
}

func TestLockExcludesASecondLauncher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "launcher.lock")
	l, err := AcquireLock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := AcquireLock(ctx, path); err == nil || !strings.Contains(err.Error(), "another launcher") {
		t.Fatalf("second lock: %v, want a wait that times out", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	_ = l2.Release()
}
