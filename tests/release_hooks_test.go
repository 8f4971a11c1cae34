package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// hookNames are the test hooks' names: environment variables that, in a
// test build, point hermes-box at another SSH user, relay command, host
// check or timing, and the agent at stand-in artifacts, an extra CA and a
// skipped gate. A release binary must not know them.
var hookNames = []string{"HBX_TEST_", "HERMES_BOX_AGENT_TEST_ONLY_PINS"}

// TestReleaseBinariesHaveNoTestHooks builds the three binaries as `make
// build` does (no build tag) and looks for the hook names in their bytes,
// as strings(1) would; the test build of the same sources must have them,
// so that the check can fail.
func TestReleaseBinariesHaveNoTestHooks(t *testing.T) {
	dir := t.TempDir()
	builds := []struct{ name, pkg string }{
		{"hermes-box", "./host"},
		{"hermes-box-agent", "./guest-agent"},
		{"hermes-box-agent-oci", "./guest-agent/cmd/hermes-box-agent-oci"},
	}
	for _, b := range builds {
		for _, test := range []bool{false, true} {
			tags := ""
			if test {
				tags = "hbxtest"
			}
			out := filepath.Join(dir, b.name)
			cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", tags, "-trimpath", "-ldflags", "-s -w", "-o", out, b.pkg)
			cmd.Dir = moduleRoot(t)
			cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
			if o, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %s %s: %v\n%s", tags, b.pkg, err, o)
			}
			bin, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, h := range hookNames {
				if bytes.Contains(bin, []byte(h)) {
					found++
					if !test {
						t.Errorf("release %s contains the test hook name %q", b.name, h)
					}
				}
			}
			if test && found == 0 && b.name != "hermes-box-agent-oci" {
				t.Errorf("the hbxtest build of %s has no hook name: the check would not notice one", b.name)
			}
		}
	}
}
