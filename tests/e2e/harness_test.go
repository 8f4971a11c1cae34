package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Env is one end-to-end run: built binaries in Bin (the stand-in as
// `smolvm`, `hermes-box`, `hermes-box-agent`), the guest image, and a
// private stand-in state dir. Commands started through it see Bin first on
// PATH, so the real hermes-box drives the stand-in as it would drive smolvm.
type Env struct {
	t       *testing.T
	Root    string // the repository
	Bin     string
	State   string
	Image   string
	Scratch string
	environ []string
}

// newEnv skips unless HERMES_BOX_E2E=1, checks the prerequisites (fatal
// under CI=true), builds the binaries and the image, and registers a cleanup
// that deletes every machine and kills any QEMU of this run.
func newEnv(t *testing.T) *Env {
	t.Helper()
	if os.Getenv("HERMES_BOX_E2E") != "1" {
		t.Skip("end-to-end VM tests run only with HERMES_BOX_E2E=1 (make e2e)")
	}
	qemu := "qemu-system-x86_64"
	if GuestArch() == "arm64" {
		qemu = "qemu-system-aarch64"
	}
	for _, tool := range []string{qemu, "qemu-img", "debootstrap", "mkfs.ext4", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			prerequisite(t, "%s not found: install qemu-system-x86 debootstrap e2fsprogs", tool)
		}
	}
	if os.Getuid() != 0 || runtime.GOARCH != "amd64" {
		prerequisite(t, "the guest image build needs root on an amd64 host")
	}
	e := &Env{t: t, Root: repoRoot(t), Bin: t.TempDir(), Scratch: t.TempDir()}
	// A short state dir: the control sockets live there and unix socket
	// paths are limited to 107 bytes.
	state, err := os.MkdirTemp("", "e2e-smolvm-")
	if err != nil {
		t.Fatal(err)
	}
	e.State = state
	phase(t, "build binaries", e.buildBinaries)
	phase(t, "guest image", e.buildImage)
	e.environ = append(os.Environ(),
		"PATH="+e.Bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SMOLVM_QEMU_STATE="+e.State, "SMOLVM_QEMU_IMAGE="+e.Image)
	t.Cleanup(e.cleanup)
	return e
}

func prerequisite(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// phase runs fn and logs how long it took.
func phase(t *testing.T, name string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	t.Logf("phase %-28s %6.1f s", name, time.Since(start).Seconds())
}

// GuestArch is the guest's architecture: SMOLVM_QEMU_ARCH (make e2e-arm64
// sets arm64, which the stand-in smolvm reads too), else amd64. The host
// picks the agent by its own architecture, so the guest's agent is written
// under the host's name (see newBox).
func GuestArch() string {
	if os.Getenv("SMOLVM_QEMU_ARCH") == "arm64" {
		return "arm64"
	}
	return "amd64"
}

func (e *Env) buildBinaries() {
	builds := []struct {
		out, pkg string
		static   bool
	}{
		{"smolvm", "./tests/smolvm-qemu", false},
		{"hermes-box", "./host", false},
		{"hermes-box-agent", "./guest-agent", true},
	}
	for _, b := range builds {
		// hbxtest names the test hooks this run uses (HBX_TEST_HOST,
		// HBX_TEST_AGENT_PINS and the agent's test-only pins).
		cmd := exec.CommandContext(e.t.Context(), "go", "build", "-tags", "hbxtest", "-trimpath", "-o", filepath.Join(e.Bin, b.out), b.pkg)
		cmd.Dir = e.Root
		cmd.Env = os.Environ()
		if b.static {
			cmd.Env = append(cmd.Env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+GuestArch())
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			e.t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
}

// buildImage uses HBX_E2E_IMAGE if set, else runs the (cached)
// image build script, whose last stdout line is the image directory.
func (e *Env) buildImage() {
	if dir := os.Getenv("HBX_E2E_IMAGE"); dir != "" {
		e.Image = dir
		return
	}
	cmd := exec.CommandContext(e.t.Context(), filepath.Join(e.Root, "images", "e2e", "build.sh"))
	cmd.Env = append(os.Environ(), "E2E_ARCH="+GuestArch())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("images/e2e/build.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	e.Image = lines[len(lines)-1]
}

// Command prepares a command with the run's environment (Bin first on PATH).
func (e *Env) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if !strings.Contains(name, "/") {
		name = filepath.Join(e.Bin, name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.environ
	cmd.Dir = e.Scratch
	return cmd
}

// Result is a finished command.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs a command of Bin with stdin (may be nil) and returns its result.
func (e *Env) Run(stdin []byte, name string, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Minute)
	defer cancel()
	cmd := e.Command(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		e.t.Fatalf("%s %s: not done after 5m\nstderr: %s\n%s", name, strings.Join(args, " "), errb.String(), e.consoles())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return Result{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: errb.String()}
}

// consoles is the tail of every guest console log of the stand-in, for a
// command that hung: the machines' (in its state dir) and a pack's remap
// boot (in the pack's temporary dir beside its output under Scratch).
func (e *Env) consoles() string {
	logs, _ := filepath.Glob(filepath.Join(e.State, "*", "console.log"))
	remaps, _ := filepath.Glob(filepath.Join(e.Scratch, ".smolvm-pack-*", "remap-console.log"))
	logs = append(logs, remaps...)
	var b strings.Builder
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s (last 2000 bytes):\n%s\n", l, tailText(string(data), 2000))
	}
	return b.String()
}

// Smolvm runs the stand-in and fails the test unless it exits 0.
func (e *Env) Smolvm(args ...string) string {
	e.t.Helper()
	r := e.Run(nil, "smolvm", args...)
	if r.Code != 0 {
		e.t.Fatalf("smolvm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// QEMUProcesses lists the live QEMU processes of this run's state dir.
func (e *Env) QEMUProcesses() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("qemu-system")) || !bytes.Contains(b, []byte(e.State+"/")) {
			continue
		}
		stat, _ := os.ReadFile(strings.TrimSuffix(p, "cmdline") + "stat")
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		out = append(out, filepath.Base(filepath.Dir(p)))
	}
	return out
}

// cleanup deletes what the test left and kills stray QEMU processes.
func (e *Env) cleanup() {
	ents, _ := os.ReadDir(e.State)
	for _, d := range ents {
		_ = e.Command(context.Background(), "smolvm", "machine", "delete", "--name", d.Name(), "--force").Run()
	}
	for _, pid := range e.QEMUProcesses() {
		e.t.Errorf("killing stray QEMU pid %s", pid)
		_ = exec.Command("kill", "-9", pid).Run()
	}
	_ = os.RemoveAll(e.State)
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually retries fn every interval until it returns nil or timeout.
func eventually(t *testing.T, timeout, interval time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

func mustf(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
