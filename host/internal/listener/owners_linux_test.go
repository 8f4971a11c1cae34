//go:build linux

package listener

import (
	"bufio"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"golang.org/x/sys/unix"
)

// vmmEnv makes the test binary a stand-in VMM (vmmMain): "dumpable" or
// "hardened" (PR_SET_DUMPABLE 0, as smolvm's `_boot-vm` does unless
// SMOLVM_FORKABLE is set).
const vmmEnv = "HBX_LISTENER_TEST_VMM"

// rootPortEnv carries, to the test re-run as an unprivileged user, a port
// the root test holds (another uid's socket).
const rootPortEnv = "HBX_LISTENER_TEST_ROOT_PORT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(vmmEnv); mode != "" {
		os.Exit(vmmMain(mode))
	}
	os.Exit(m.Run())
}

// vmmMain hardens itself when asked, listens on 127.0.0.1 and ::1 (best
// effort) on one port, prints it, and runs until its stdin closes.
func vmmMain(mode string) int {
	if mode == "hardened" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			os.Stderr.WriteString("prctl: " + err.Error() + "\n")
			return 1
		}
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	port := l.Addr().(*net.TCPAddr).Port
	if l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		defer l6.Close()
	}
	os.Stdout.WriteString(strconv.Itoa(port) + "\n")
	buf := make([]byte, 1)
	os.Stdin.Read(buf)
	return 0
}

type vmm struct{ pid, port int }

// startVMM runs the test binary as a stand-in VMM (mode as vmmMain).
func startVMM(t *testing.T, mode string) vmm {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self)
	cmd.Env = append(os.Environ(), vmmEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	port, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("stand-in VMM (%s): %q %v", mode, line, err)
	}
	return vmm{pid: cmd.Process.Pid, port: port}
}

// TestCheckOwnerNonDumpableVMM runs as an unprivileged user (re-run under
// setpriv as uid 65534 when the test runs as root) against a VMM that made
// itself non-dumpable as smolvm's does: its descriptors cannot be read,
// and its port is still the box's. A squatter is still refused: another
// uid's socket, and this user's socket when the VMM's descriptors can be
// read and do not hold it.
func TestCheckOwnerNonDumpableVMM(t *testing.T) {
	if os.Geteuid() == 0 {
		rerunAsUser(t, "^TestCheckOwnerNonDumpableVMM$")
		return
	}
	var c Checker
	hardened := startVMM(t, "hardened")
	if _, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(hardened.pid), "fd")); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("the hardened VMM's descriptors: %v; want permission denied", err)
	}
	if err := c.CheckOwner(t.Context(), hardened.port, hardened.pid); err != nil {
		t.Errorf("the non-dumpable VMM's own port: %v", err)
	}

	// A readable VMM that does not hold the port: the holder, another of
	// this user's non-dumpable processes, is a squatter.
	dumpable := startVMM(t, "dumpable")
	squatter := startVMM(t, "hardened")
	if err := c.CheckOwner(t.Context(), dumpable.port, dumpable.pid); err != nil {
		t.Errorf("the dumpable VMM's own port: %v", err)
	}
	err := c.CheckOwner(t.Context(), squatter.port, dumpable.pid)
	if !errors.Is(err, ErrForeignListener) || !strings.Contains(err.Error(), "does not hold it") {
		t.Errorf("this user's squatter beside a readable VMM: %v", err)
	}
	// A VMM that is hidden but another user's (pid 1, root's): this
	// user's socket that no readable process holds is not its.
	err = c.CheckOwner(t.Context(), hardened.port, 1)
	if !errors.Is(err, ErrForeignListener) || !strings.Contains(err.Error(), "the box's VMM 1 does not hold it") {
		t.Errorf("this user's hidden socket, for another user's VMM: %v", err)
	}
	err = c.CheckOwner(t.Context(), dumpable.port, hardened.pid)
	if !errors.Is(err, ErrForeignListener) || !strings.Contains(err.Error(), "process "+strconv.Itoa(dumpable.pid)) {
		t.Errorf("a readable process's port, for another VMM: %v", err)
	}

	if v := os.Getenv(rootPortEnv); v != "" {
		port, _ := strconv.Atoi(v)
		err := c.CheckOwner(t.Context(), port, hardened.pid)
		if !errors.Is(err, ErrForeignListener) || !strings.Contains(err.Error(), "a socket of uid 0") {
			t.Errorf("root's socket: %v", err)
		}
	} else if os.Getenv("CI") == "true" {
		t.Error("no port of another uid to refuse (run as root, the test re-runs itself as uid 65534)")
	}
}

// rerunAsUser runs the test binary's test run as uid 65534
// (sshdtest.RerunAsUser), holding a loopback port of its own (uid 0) for
// it to refuse.
func rerunAsUser(t *testing.T, run string) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sshdtest.RerunAsUser(t, run, rootPortEnv+"="+strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
}
