//go:build linux

package box

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/config"
)

// fakeSmolvmEnv names, for the test re-run as an unprivileged user, the
// fake smolvm the root test built.
const fakeSmolvmEnv = "HBX_BOX_TEST_FAKESMOLVM"

// TestExecutorListenerAsUser runs the Executor port's check as an
// unprivileged user (uid 65534 under setpriv when the test runs as root)
// against the fake smolvm's VMM, which makes itself non-dumpable as
// smolvm's `_boot-vm` does: the user cannot read its descriptors, and the
// port it publishes is still the box's.
func TestExecutorListenerAsUser(t *testing.T) {
	if os.Geteuid() == 0 {
		rerunExecutorListenerAsUser(t)
		return
	}
	fake := os.Getenv(fakeSmolvmEnv)
	if fake == "" {
		fake = sshdtest.GoBuild(t, filepath.Join(t.TempDir(), "path", "smolvm"), "./tests/fakesmolvm")
	}
	port := sshdtest.FreePort(t)
	root := t.TempDir()
	conf := fmt.Sprintf("HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=%d\n", port)
	if err := os.WriteFile(filepath.Join(root, "hermes-box.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(fake)+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKESMOLVM_STATE", filepath.Join(t.TempDir(), "smolvm"))
	for _, k := range []string{"SMOLVM_FORKABLE", "SMOLVM_CUDA_CLONE_PTRACEABLE", "SMOLVM_PUBLISH_ADDR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cfg, err := config.Load(root, nil) // the project file alone: CI sets HERMES_BOX_HERMES_TREES and such for other tests
	if err != nil {
		t.Fatal(err)
	}
	smolvm := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(t.Context(), fake, args...).CombinedOutput(); err != nil {
			t.Fatalf("smolvm %v: %v\n%s", args, err, out)
		}
	}
	smolvm("machine", "create", "--name", cfg.MachineName, "--image", "ubuntu:24.04", "-p", strconv.Itoa(port)+":4788", "--net")
	smolvm("machine", "start", "--name", cfg.MachineName)
	t.Cleanup(func() { exec.Command(fake, "machine", "stop", "--name", cfg.MachineName).Run() })

	b := New(cfg, nopUI{})
	m, err := machineState(t.Context(), b, cfg.MachineName)
	if err != nil || m.PID == nil {
		t.Fatalf("the machine's VMM: %+v %v", m, err)
	}
	if _, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(*m.PID), "fd")); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("the fake VMM's descriptors: %v; want permission denied (a non-dumpable VMM)", err)
	}
	if err := CheckExecutorListener(t.Context(), b); err != nil {
		t.Errorf("the box's own Executor port, as uid %d: %v", os.Geteuid(), err)
	}
}

// rerunExecutorListenerAsUser builds the fake smolvm where uid 65534 can
// run it and runs TestExecutorListenerAsUser again as that user.
func rerunExecutorListenerAsUser(t *testing.T) {
	fake := sshdtest.GoBuild(t, filepath.Join(sshdtest.UserDir(t, "box-user-"), "path", "smolvm"), "./tests/fakesmolvm")
	if err := os.Chmod(filepath.Dir(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	sshdtest.RerunAsUser(t, "^TestExecutorListenerAsUser$", fakeSmolvmEnv+"="+fake)
}
