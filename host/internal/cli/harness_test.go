package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
)

// bins are the binaries of the lifecycle tests (boxtest.Build) and the
// hermes-box under test, built once per test binary.
var bins struct {
	*boxtest.Binaries
	hermesBox string
}

var buildOnce sync.Once

// buildBinaries builds what boxtest builds and hermes-box beside it.
func buildBinaries(t testing.TB) {
	t.Helper()
	sshdtest.SkipShort(t, "builds hermes-box and runs it against the fake smolvm")
	b := boxtest.Build(t)
	buildOnce.Do(func() {
		bins.Binaries = b
		bins.hermesBox = sshdtest.GoBuild(t, filepath.Join(b.Dir, "hermes-box"), "./host")
	})
	if bins.hermesBox == "" {
		t.Fatal("building hermes-box failed in an earlier test")
	}
}

func TestMain(m *testing.M) { os.Exit(boxtest.Main(m)) }

// harness is a boxtest project that hermes-box runs in.
type harness struct{ *boxtest.Project }

// v2Snapshots is the configuration line of the tests that pin the
// hermes-box-v2 writer (HERMES_BOX_SNAPSHOT_INCREMENTAL=false, the opt-out):
// its parts, sums and signature, its per-part progress and its agent verb,
// `snapshot write`. Every other test snapshots incrementally, the default.
const v2Snapshots = "HERMES_BOX_SNAPSHOT_INCREMENTAL=false"

func newHarness(t testing.TB, conf ...string) *harness {
	t.Helper()
	buildBinaries(t)
	return &harness{boxtest.New(t, conf...)}
}

// result is one run of hermes-box.
type result struct {
	code           int
	stdout, stderr string
	calls          []boxtest.Call // the smolvm calls this run made
	maxRSSKiB      int64          // the peak resident set of hermes-box itself (VmHWM, KiB; 0 without /proc)
	treeRSSKiB     int64          // the rusage peak, which counts the children it waited for (Linux: KiB)
	elapsed        time.Duration
}

// run runs hermes-box with args; the smolvm calls it made are returned.
func (h *harness) run(args ...string) result {
	h.T.Helper()
	return h.runInput("", args...)
}

// runLimit bounds one run of hermes-box: past the longest deadline of an
// agent verb that a hostile test waits for (5 min) and its slack.
const runLimit = 8 * time.Minute

// runInput is run with stdin.
func (h *harness) runInput(stdin string, args ...string) result {
	h.T.Helper()
	before := len(h.Calls())
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := h.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Start()
	var hwm int64
	if err == nil {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); hwm = boxtest.WatchHWM(cmd.Process.Pid, stop) }()
		err = cmd.Wait()
		close(stop)
		<-done
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), calls: h.Calls()[before:], elapsed: time.Since(start), maxRSSKiB: hwm}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.treeRSSKiB = int64(ru.Maxrss)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.T.Fatalf("running hermes-box %v: %v", args, err)
	}
	return r
}

// command is hermes-box with args in the harness's environment.
func (h *harness) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bins.hermesBox, args...)
	cmd.Env = append(append([]string(nil), h.Env...), h.Extra...)
	return cmd
}
