package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/health"
)

// installedTarget is a fixture of version with the gate installed and a
// verdict cache, healthy once (which keeps the anchors' verification).
func installedTarget(t *testing.T, version string) (Target, *fakeRunner) {
	t.Helper()
	rel := release(t, version)
	run := &fakeRunner{probe: answer(t, intended(rel.Mechanism))}
	tgt := fixtureTarget(t, version, run)
	tgt.Verdicts = verdictsIn(filepath.Join(t.TempDir(), "state"))
	if err := (Installer{}).Apply(context.Background(), tgt); err != nil {
		t.Fatal(err)
	}
	mustBeHealthy(t, tgt)
	return tgt, run
}

func mustBeHealthy(t *testing.T, tgt Target) {
	t.Helper()
	if c, g := Health(context.Background(), tgt, time.Unix(0, 0)); c.Status != health.StatusHealthy {
		t.Fatalf("health %+v %+v", c, g)
	}
}

// TestAnchorsCacheKeepsAVerifiedTree: a health check of an unchanged tree
// takes the kept verification (the record is not written again) and the
// verdict (the probe runs once), each file hashed once for both keys.
func TestAnchorsCacheKeepsAVerifiedTree(t *testing.T) {
	for _, version := range []string{"0.16.0", "0.19.0"} {
		t.Run(version, func(t *testing.T) {
			tgt, run := installedTarget(t, version)
			before, err := os.Stat(tgt.Verdicts.AnchorsPath)
			if err != nil || before.Mode().Perm() != 0o600 {
				t.Fatalf("anchors record %v %v, want mode 0600", before, err)
			}
			probes := run.probes()
			mustBeHealthy(t, tgt)
			mustBeHealthy(t, tgt)
			if after, err := os.Stat(tgt.Verdicts.AnchorsPath); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
				t.Fatalf("the anchors were verified again on an unchanged tree (%v)", err)
			}
			if n := run.probes(); n != probes {
				t.Fatalf("probe ran %d times more on unchanged inputs, want 0", n-probes)
			}
		})
	}
}

// TestAnchorsCacheCatchesAChangedFile: a patched file, the marker or the
// reviewer module changed after a kept verification is caught by the next
// health check.
func TestAnchorsCacheCatchesAChangedFile(t *testing.T) {
	cases := []struct {
		version, file, text, want string
	}{
		{"0.19.0", "agent/auxiliary_client.py", "hermes-box:gate-service-tier", "marked as patched but the file is not"},
		{"0.19.0", patch.MarkerFile, "anchor_set=", "the tree was patched by a different hermes-box"},
		{"0.16.0", approvalPy, "hermes-box:gate", "marked as patched but the file is not"},
		{"0.16.0", patch.ModulePath, "def ", "installed reviewer module differs"},
	}
	for _, tc := range cases {
		t.Run(tc.version+"/"+tc.file, func(t *testing.T) {
			tgt, _ := installedTarget(t, tc.version)
			alter(t, tgt.Source, tc.file, tc.text)
			c, _ := Health(context.Background(), tgt, time.Unix(0, 0))
			if c.Status != health.StatusUnhealthy || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("health after %s changed: %+v", tc.file, c)
			}
		})
	}
}

// TestAnchorsCacheDistrustsItsFile: an anchors record that is not the
// agent's alone is ignored: the tree is verified again, and a changed file
// caught.
func TestAnchorsCacheDistrustsItsFile(t *testing.T) {
	cases := map[string]func(t *testing.T, tgt *Target){
		"world-writable": func(t *testing.T, tgt *Target) { chmod(t, tgt.Verdicts.AnchorsPath, 0o602) },
		"another owner":  func(t *testing.T, tgt *Target) { tgt.Verdicts.Owner = os.Geteuid() + 1 },
		"a symlink":      func(t *testing.T, tgt *Target) { linkInPlace(t, tgt.Verdicts.AnchorsPath) },
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			tgt, _ := installedTarget(t, "0.19.0")
			tamper(t, &tgt)
			before, err := os.Lstat(tgt.Verdicts.AnchorsPath)
			if err != nil {
				t.Fatal(err)
			}
			mustBeHealthy(t, tgt)
			if after, err := os.Lstat(tgt.Verdicts.AnchorsPath); err == nil && os.SameFile(before, after) {
				t.Fatal("the distrusted record answered: the tree was not verified again")
			}
		})
	}
}

// TestVerdictKeyTakesTheAnchorsDigests: the verdict's key from the
// digests the anchors' verification kept is the key of the files read
// afresh, so a verdict kept after a health check's probe answers the next.
func TestVerdictKeyTakesTheAnchorsDigests(t *testing.T) {
	tgt, _ := installedTarget(t, "0.19.0")
	rel := release(t, "0.19.0")
	seen := newInputs()
	if p := markerProblems(context.Background(), tgt, rel.Commit, seen); len(p) > 0 {
		t.Fatal(p)
	}
	if len(seen.files) == 0 {
		t.Fatal("the verification kept no file")
	}
	withSeen, fresh := verdictKey(tgt, rel, seen), verdictKey(tgt, rel, nil)
	if !withSeen.ok || withSeen != fresh {
		t.Fatalf("key from the kept digests %+v, read afresh %+v", withSeen, fresh)
	}
}

// verdictsIn is a verdict cache with its records in dir.
func verdictsIn(dir string) *VerdictCache {
	return NewVerdictCache(filepath.Join(dir, "gate-verdict.json"), filepath.Join(dir, "gate-anchors.json"))
}
