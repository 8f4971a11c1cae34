package tests

import "testing"

// TestOCITestIsTestOnly: the test-support package ocitest (and the
// in-memory registry it brings) is imported by _test.go files only, so it
// never reaches the agent binary.
func TestOCITestIsTestOnly(t *testing.T) {
	ocitest := mod + "/guest-agent/internal/oci/ocitest"
	forbidden := []string{ocitest, "github.com/google/go-containerregistry/pkg/registry"}
	for pkg, ds := range deps(t, "./...") {
		if pkg == ocitest {
			continue
		}
		for _, d := range ds {
			for _, f := range forbidden {
				if d == f {
					t.Errorf("%s imports %s outside its tests", pkg, d)
				}
			}
		}
	}
}
