package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The two mains: the lean agent and its Executor helper.
const (
	leanMain   = "./guest-agent"
	helperMain = "./guest-agent/cmd/hermes-box-agent-oci"
)

// buildAgent builds the main package pkg into out; extra are more `go
// build` flags.
func buildAgent(tb testing.TB, out, pkg string, extra ...string) {
	tb.Helper()
	args := append([]string{"build", "-o", out}, extra...)
	cmd := exec.CommandContext(tb.Context(), "go", append(args, pkg)...)
	cmd.Dir = moduleRoot(tb)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// BenchmarkAgentSize reports the size of the lean agent and of its
// Executor helper for linux/arm64 (the target), built as `make build` builds them
// (static, -trimpath, stripped): the README's size figures.
func BenchmarkAgentSize(b *testing.B) {
	b.Setenv("CGO_ENABLED", "0")
	b.Setenv("GOOS", "linux")
	b.Setenv("GOARCH", "arm64")
	dir := b.TempDir()
	for _, a := range []struct{ name, pkg string }{
		{"agent", leanMain},
		{"oci-helper", helperMain},
	} {
		b.Run(a.name, func(b *testing.B) {
			out := filepath.Join(dir, a.name)
			var size int64
			for b.Loop() {
				buildAgent(b, out, a.pkg, "-trimpath", "-ldflags", "-s -w")
				fi, err := os.Stat(out)
				if err != nil {
					b.Fatal(err)
				}
				size = fi.Size()
			}
			b.ReportMetric(float64(size)/1e6, "MB")
		})
	}
}

// TestLeanAgentHandsExecutorToItsHelper shows the lean agent's `executor`
// verb is the helper's, output and exit status alike, and fails clearly
// when the helper is not installed.
func TestLeanAgentHandsExecutorToItsHelper(t *testing.T) {
	bin := t.TempDir()
	lean, helper := filepath.Join(bin, "hermes-box-agent"), filepath.Join(bin, "hermes-box-agent-oci")
	buildAgent(t, lean, leanMain)
	buildAgent(t, helper, helperMain)
	root := t.TempDir()
	run := func(exe string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(t.Context(), exe, append([]string{"--root", root}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	for _, args := range [][]string{{"executor", "status"}, {"executor", "frobnicate"}} {
		wantCode, wantOut, _ := run(helper, args...)
		code, out, errs := run(lean, args...)
		if code != wantCode || out != wantOut {
			t.Errorf("%v: lean agent exit %d stdout %q; helper exit %d stdout %q (stderr %s)", args, code, out, wantCode, wantOut, errs)
		}
	}
	if code, _, _ := run(lean, "executor", "frobnicate"); code == 0 {
		t.Error("an unknown executor subcommand succeeded")
	}
	if err := os.Remove(helper); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(lean, "executor", "status")
	if code != 1 || !strings.Contains(errs, "hermes-box-agent-oci") {
		t.Fatalf("without the helper: exit %d, stderr %s", code, errs)
	}
}
