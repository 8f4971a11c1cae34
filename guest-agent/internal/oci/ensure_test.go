package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
)

// TestEnsureActive: the first launch pulls and activates; later launches
// with the same content (also under another tag) touch no network and keep
// the previous release for a rollback; a new digest is pulled and switched.
func TestEnsureActive(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	bun := readTestdata(t, "fake-bun.sh")
	imgA := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64", bun))
	imgB := ocitest.Image(t, "linux", "arm64", ocitest.ExecutorLayers(t, "arm64-b", bun))
	refA := push(t, reg, "executor/selfhost:a", imgA, nil)
	refB := push(t, reg, "executor/selfhost:b", imgB, nil)
	s, _ := newStore(t, reg, "arm64")

	if _, err := s.EnsureActive(t.Context(), refA); err != nil {
		t.Fatal(err)
	}
	rB, err := s.EnsureActive(t.Context(), refB)
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := s.Releases(); len(rs) != 2 {
		t.Fatalf("releases %v, want A kept for a rollback and B", rs)
	}
	gets := map[string]int{}
	for _, d := range append(ocitest.LayerDigests(t, imgA), ocitest.LayerDigests(t, imgB)...) {
		gets[d] = reg.BlobGets(d)
	}
	retagged := refB
	retagged.Tag = "renamed"
	for _, ref := range []Reference{refB, retagged} {
		r, err := s.EnsureActive(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != rB.Name || r.ImageReference != ref.String() {
			t.Fatalf("got %+v for %s", r, ref)
		}
	}
	for d, n := range gets {
		if got := reg.BlobGets(d); got != n {
			t.Errorf("blob %s fetched again (%d → %d) although current held the content", d, n, got)
		}
	}
	if rs, _ := s.Releases(); len(rs) != 2 {
		t.Fatalf("releases %v after relaunches, want both still there", rs)
	}
	b, _ := os.ReadFile(filepath.Join(s.Root, "current", metaImageReference))
	if strings.TrimSpace(string(b)) != retagged.String() {
		t.Fatalf("image reference %q, want the new tag", b)
	}
	if got := readLink(t, filepath.Join(s.Root, "current")); got != "releases/"+rB.Name {
		t.Fatalf("current -> %q", got)
	}
}
