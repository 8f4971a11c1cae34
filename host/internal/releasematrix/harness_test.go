//go:build linux

package releasematrix_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
)

func TestMain(m *testing.M) { os.Exit(boxtest.Main(m)) }

// runLimit bounds one run of hermes-box: past the longest deadline of an
// agent verb that the matrix waits for (5 min) and its slack.
const runLimit = 8 * time.Minute

// rssBudgetKiB is the host's memory goal under a flood.
const rssBudgetKiB = 64 << 10

var (
	testBuildOnce sync.Once
	testBuild     string
)

// testHermesBox is the test build of hermes-box (its hooks let it set the
// boxes up fast), built once beside boxtest's binaries.
func testHermesBox(t testing.TB) string {
	t.Helper()
	sshdtest.SkipShort(t, "builds hermes-box and runs it against the fake smolvm")
	b := boxtest.Build(t)
	testBuildOnce.Do(func() { testBuild = sshdtest.GoBuild(t, filepath.Join(b.Dir, "hermes-box"), "./host") })
	if testBuild == "" {
		t.Fatal("building hermes-box failed in an earlier test")
	}
	return testBuild
}

// run runs the test build of hermes-box with args in p's project, with
// the product's timings (the test hook's 30 s to a healthy box is short for
// a loaded machine): its output, and how it failed.
func run(t testing.TB, p *boxtest.Project, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, testHermesBox(t), args...)
	cmd.Env = slices.DeleteFunc(slices.Concat(p.Env, p.Extra), func(kv string) bool { return strings.HasPrefix(kv, "HBX_TEST_TIMING=") })
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// mustRun is run, which must succeed.
func mustRun(t testing.TB, p *boxtest.Project, args ...string) {
	t.Helper()
	if out, err := run(t, p, args...); err != nil {
		t.Fatalf("hermes-box %v: %v\n%s", args, err, out)
	}
}
