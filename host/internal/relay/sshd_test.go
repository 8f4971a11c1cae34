package relay

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"golang.org/x/crypto/ssh"
)

// sshdPath is Debian's OpenSSH server (package openssh-server).
const sshdPath = "/usr/sbin/sshd"

// sshdFixture is a real sshd on 127.0.0.1 that lets the current user log in
// with a fresh project key and runs the real agent, built from this module.
type sshdFixture struct {
	dir     string
	port    int
	addr    string
	user    string
	keyPath string // the project key (private), for the ssh client
	signer  ssh.Signer
	hostKey ssh.PublicKey // the key the running sshd presents
	agent   string        // the built hermes-box-agent
	log     *syncBuffer   // sshd's -e output
	cmd     *exec.Cmd
	exited  chan struct{}
}

// requireSSHD skips when sshd is not installed; under CI=true a test fails
// instead, so CI cannot silently lose the integration test. Benchmarks
// always skip.
func requireSSHD(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(sshdPath); err == nil {
		return
	}
	_, isBench := tb.(*testing.B)
	if os.Getenv("CI") == "true" && !isBench {
		tb.Fatalf("%s is missing (install openssh-server); CI=true requires this test to run", sshdPath)
	}
	tb.Skipf("%s is missing (install openssh-server)", sshdPath)
}

// newSSHDFixture builds the agent, writes keys and config, and starts sshd
// on a free loopback port. sshd is stopped when the test ends.
func newSSHDFixture(tb testing.TB) *sshdFixture {
	tb.Helper()
	requireSSHD(tb)
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	f := &sshdFixture{dir: tb.TempDir(), user: u.Username, log: &syncBuffer{}}
	f.agent = buildAgent(tb, f.dir)
	f.keyPath = filepath.Join(f.dir, "client", "id_ed25519")
	if f.signer, err = keys.EnsureProjectKey(f.keyPath, "hermes-box integration test"); err != nil {
		tb.Fatal(err)
	}
	f.port = freePort(tb)
	f.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port))
	if os.Geteuid() == 0 {
		// sshd started as root needs its privilege separation directory,
		// which Debian's service unit would otherwise create.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	f.start(tb, "first")
	tb.Cleanup(func() { f.stop(tb) })
	return f
}

// start writes a new host key and config named after generation and starts
// sshd with them on f.port, waiting until it answers with an SSH banner.
func (f *sshdFixture) start(tb testing.TB, generation string) {
	tb.Helper()
	hostKeyPath := filepath.Join(f.dir, "sshd-"+generation, "ssh_host_ed25519_key")
	hostSigner, err := keys.EnsureProjectKey(hostKeyPath, "")
	if err != nil {
		tb.Fatal(err)
	}
	f.hostKey = hostSigner.PublicKey()
	config := filepath.Join(f.dir, "sshd-"+generation, "sshd_config")
	if err := os.WriteFile(config, []byte(f.config(hostKeyPath)), 0o600); err != nil {
		tb.Fatal(err)
	}
	// Not tied to the test's context: stop owns the process's end.
	f.cmd = exec.Command(sshdPath, "-D", "-e", "-f", config)
	f.cmd.Stdout, f.cmd.Stderr = f.log, f.log
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.cmd.Start(); err != nil {
		tb.Fatalf("starting sshd: %v", err)
	}
	exited := make(chan struct{})
	f.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(f.cmd)
	if err := f.waitBanner(); err != nil {
		f.stop(tb)
		tb.Fatalf("sshd on %s: %v\nsshd log:\n%s", f.addr, err, f.log)
	}
}

func (f *sshdFixture) config(hostKeyPath string) string {
	lines := []string{
		"Port " + strconv.Itoa(f.port),
		"ListenAddress 127.0.0.1",
		"HostKey " + hostKeyPath,
		"AuthorizedKeysFile " + f.keyPath + keys.PubSuffix,
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"AllowUsers " + f.user,
		"LogLevel VERBOSE",
		"MaxStartups 100:30:200",
	}
	if os.Geteuid() == 0 {
		lines = append(lines, "PermitRootLogin prohibit-password")
	}
	return strings.Join(lines, "\n") + "\n"
}

// waitBanner polls until sshd accepts and sends its version line.
func (f *sshdFixture) waitBanner() error {
	deadline := time.Now().Add(waitLimit)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-f.exited:
			return fmt.Errorf("sshd exited during start-up")
		default:
		}
		lastErr = readBanner(f.addr)
		if lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no SSH banner within %v: %w", waitLimit, lastErr)
}

func readBanner(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("unexpected banner %q", line)
	}
	return nil
}

// stop ends sshd (SIGTERM, then SIGKILL) and waits a bounded time.
func (f *sshdFixture) stop(tb testing.TB) {
	tb.Helper()
	if f.cmd == nil {
		return
	}
	pid := f.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-f.exited:
		case <-time.After(5 * time.Second):
			tb.Errorf("sshd (pid %d) did not exit", pid)
		}
	}
	f.cmd = nil
}

// relay returns the SSH transport for the fixture, pinning pinned.
func (f *sshdFixture) relay(pinned ssh.PublicKey, command string) *SSH {
	return &SSH{Addr: f.addr, User: f.user, Signer: f.signer, HostKey: pinned, Command: command, DialTimeout: waitLimit}
}

// buildAgent builds ./guest-agent of this module into dir.
func buildAgent(tb testing.TB, dir string) string {
	tb.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("the go command is needed to build the agent: %v", err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		tb.Fatalf("finding the module root with go env GOMOD: %q, %v", out, err)
	}
	bin := filepath.Join(dir, "hermes-box-agent")
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./guest-agent")
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// shellQuote quotes s for the remote login shell that runs the command.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
