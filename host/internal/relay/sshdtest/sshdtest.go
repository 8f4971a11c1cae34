//go:build !hbxrelease

// Package sshdtest runs Debian's OpenSSH sshd on 127.0.0.1 for tests: a
// fresh client key, a host key, a config that admits the current user with
// that key only, and a bounded start and stop. It also builds binaries of
// this module (the agent) for tests that run them as remote commands.
package sshdtest

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"golang.org/x/crypto/ssh"
)

// SSHDPath is Debian's OpenSSH server (package openssh-server).
const SSHDPath = "/usr/sbin/sshd"

// WaitLimit bounds every wait of this package.
const WaitLimit = 10 * time.Second

// Options tune a Server; the zero value is a fresh key pair in a temp dir.
type Options struct {
	// KeyPath is the client's private key; created when missing. Default
	// <dir>/client/id_ed25519.
	KeyPath string
	// HostKeyPath is the host key of the first generation; created when
	// missing. Default <dir>/sshd-first/ssh_host_ed25519_key.
	HostKeyPath string
	// NoAgent skips building the agent.
	NoAgent bool
}

// Server is a real sshd on 127.0.0.1 that lets the current user log in with
// the client key and runs whatever command the client asks for.
type Server struct {
	Dir     string
	Port    int
	Addr    string
	User    string
	KeyPath string // the client key (private), for the ssh client
	Signer  ssh.Signer
	HostKey ssh.PublicKey // the key the running sshd presents
	Agent   string        // the built hermes-box-agent, unless Options.NoAgent
	Log     *SyncBuffer   // sshd's -e output

	hostKeyPath string
	cmd         *exec.Cmd
	exited      chan struct{}
}

// Require skips when sshd is not installed; under CI=true a test fails
// instead, so CI cannot silently lose an integration test. Benchmarks
// always skip.
func Require(tb testing.TB) {
	tb.Helper()
	SkipShort(tb, "starts Debian's sshd")
	if _, err := os.Stat(SSHDPath); err == nil {
		return
	}
	_, isBench := tb.(*testing.B)
	if os.Getenv("CI") == "true" && !isBench {
		tb.Fatalf("%s is missing (install openssh-server); CI=true requires this test to run", SSHDPath)
	}
	tb.Skipf("%s is missing (install openssh-server)", SSHDPath)
}

// New builds the agent, writes keys and config, and starts sshd on a free
// loopback port. sshd is stopped when the test ends.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	Require(tb)
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Dir: tb.TempDir(), User: u.Username, Log: &SyncBuffer{}, hostKeyPath: opts.HostKeyPath}
	if !opts.NoAgent {
		s.Agent = BuildAgent(tb, s.Dir)
	}
	s.KeyPath = opts.KeyPath
	if s.KeyPath == "" {
		s.KeyPath = filepath.Join(s.Dir, "client", "id_ed25519")
	}
	if s.Signer, err = keys.EnsureProjectKey(s.KeyPath, "hermes-box integration test"); err != nil {
		tb.Fatal(err)
	}
	s.Port = FreePort(tb)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	if os.Geteuid() == 0 {
		// sshd started as root needs its privilege separation directory,
		// which Debian's service unit would otherwise create.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	s.Start(tb, "first")
	tb.Cleanup(func() { s.Stop(tb) })
	return s
}

// Start writes the host key and config named after generation (a new host
// key unless Options.HostKeyPath names the first one) and starts sshd on
// s.Port, waiting until it answers with an SSH banner.
func (s *Server) Start(tb testing.TB, generation string) {
	tb.Helper()
	dir := filepath.Join(s.Dir, "sshd-"+generation)
	hostKeyPath := filepath.Join(dir, "ssh_host_ed25519_key")
	if generation == "first" && s.hostKeyPath != "" {
		hostKeyPath = s.hostKeyPath
	}
	hostSigner, err := keys.EnsureProjectKey(hostKeyPath, "")
	if err != nil {
		tb.Fatal(err)
	}
	s.HostKey = hostSigner.PublicKey()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	config := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(config, []byte(s.config(hostKeyPath)), 0o600); err != nil {
		tb.Fatal(err)
	}
	// Not tied to the test's context: Stop owns the process's end.
	s.cmd = exec.Command(SSHDPath, "-D", "-e", "-f", config)
	s.cmd.Stdout, s.cmd.Stderr = s.Log, s.Log
	s.cmd.SysProcAttr = procAttr()
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting sshd: %v", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(s.cmd)
	if err := s.waitBanner(); err != nil {
		s.Stop(tb)
		tb.Fatalf("sshd on %s: %v\nsshd log:\n%s", s.Addr, err, s.Log)
	}
}

func (s *Server) config(hostKeyPath string) string {
	return Config(s.Port, hostKeyPath, s.KeyPath+keys.PubSuffix, s.User, "LogLevel VERBOSE")
}

// Config is an sshd_config for 127.0.0.1:port that admits user with the
// keys in authorizedKeys only; extra lines are appended, except that the
// variables of extra SetEnv lines join the one SetEnv line sshd honours.
func Config(port int, hostKeyPath, authorizedKeys, user string, extra ...string) string {
	return ConfigOn("127.0.0.1", port, hostKeyPath, authorizedKeys, user, extra...)
}

// ConfigOn is Config for the loopback address host (a fake machine's
// guest address).
func ConfigOn(host string, port int, hostKeyPath, authorizedKeys, user string, extra ...string) string {
	lines := []string{
		"Port " + strconv.Itoa(port),
		"ListenAddress " + host,
		"HostKey " + hostKeyPath,
		"AuthorizedKeysFile " + authorizedKeys,
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"AllowUsers " + user,
		"MaxStartups 100:30:200",
		"AcceptEnv TERM COLORTERM TERM_PROGRAM TERM_PROGRAM_VERSION",
		// sshd runs every command through the user's login shell, and
		// bash sources ~/.bashrc (and /etc/bash.bashrc) for a command run
		// by sshd when it is a top-level shell. In the box that is
		// boxadmin's skeleton .bashrc, which returns at once for a
		// non-interactive shell; here it would be the developer's own
		// (on the CI image, root's runs `pyenv init`: ~100 ms per
		// session, more than the relay call itself). Starting sessions
		// at level 1 makes the shell level 2, so bash reads neither
		// file and a session costs what it costs in the box.
		"SetEnv " + SessionShellLevel,
	}
	setEnv := len(lines) - 1
	if os.Geteuid() == 0 {
		lines = append(lines, "PermitRootLogin prohibit-password")
	}
	for _, line := range extra {
		// sshd takes the first SetEnv line only, so extra ones are
		// folded into it.
		if vars, ok := strings.CutPrefix(line, "SetEnv "); ok {
			lines[setEnv] += " " + vars
			continue
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n") + "\n"
}

// SessionShellLevel is set in every session of a Server, so the login
// shell running a command reads no startup files (see Config).
const SessionShellLevel = "SHLVL=1"

// waitBanner polls until sshd accepts and sends its version line.
func (s *Server) waitBanner() error {
	deadline := time.Now().Add(WaitLimit)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("sshd exited during start-up")
		default:
		}
		lastErr = ReadBanner(s.Addr)
		if lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no SSH banner within %v: %w", WaitLimit, lastErr)
}

// ReadBanner connects to addr and checks for an SSH version line.
func ReadBanner(addr string) error {
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

// Stop ends sshd (SIGTERM, then SIGKILL) and waits a bounded time.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			tb.Errorf("sshd (pid %d) did not exit", pid)
		}
	}
	s.cmd = nil
}

// BuildAgent builds the agent as the box runs it (the lean main, not
// its Executor helper) into dir.
func BuildAgent(tb testing.TB, dir string) string {
	tb.Helper()
	return GoBuild(tb, filepath.Join(dir, "hermes-box-agent"), "./guest-agent")
}

// TestTag is the build tag that compiles the test hooks (HBX_TEST_*, the
// agent's test-only pins) into the binaries; release builds leave it out.
const TestTag = "hbxtest"

// GoBuild builds the package pkg of this module (a path relative to the
// module root, e.g. "./host") into out, with extra `go build` flags. The
// binary is built with TestTag added to the tags of flags (or, when flags
// name none, of $GOFLAGS).
func GoBuild(tb testing.TB, out, pkg string, flags ...string) string {
	tb.Helper()
	flags, env := withTestTag(flags)
	return goBuild(tb, out, pkg, env, flags...)
}

// GoBuildRelease builds pkg with exactly the given flags, as a release.
func GoBuildRelease(tb testing.TB, out, pkg string, flags ...string) string {
	tb.Helper()
	return goBuild(tb, out, pkg, append(os.Environ(), "GOFLAGS="), flags...)
}

// withTestTag merges TestTag into the -tags of flags or of $GOFLAGS, and
// returns the flags and the environment to build with.
func withTestTag(flags []string) ([]string, []string) {
	var tags []string
	var rest []string
	for i := 0; i < len(flags); i++ {
		switch {
		case flags[i] == "-tags" && i+1 < len(flags):
			tags = append(tags, strings.Split(flags[i+1], ",")...)
			i++
		case strings.HasPrefix(flags[i], "-tags="):
			tags = append(tags, strings.Split(strings.TrimPrefix(flags[i], "-tags="), ",")...)
		default:
			rest = append(rest, flags[i])
		}
	}
	var goflags []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if t, ok := strings.CutPrefix(f, "-tags="); ok {
			if len(tags) == 0 {
				tags = strings.Split(t, ",")
			}
			continue
		}
		goflags = append(goflags, f)
	}
	tags = append(tags, TestTag)
	env := append(os.Environ(), "GOFLAGS="+strings.Join(goflags, " "))
	return append([]string{"-tags", strings.Join(tags, ",")}, rest...), env
}

// SkipShort skips tb under `go test -short` (make check), saying what
// the test does that the short run leaves to make test: build the
// project's binaries, start sshd, boot a machine. make test and CI never
// pass -short, so there these tests always run.
func SkipShort(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("-short: this test %s (make test runs it)", what)
	}
}

func goBuild(tb testing.TB, out, pkg string, env []string, flags ...string) string {
	tb.Helper()
	SkipShort(tb, "builds "+pkg)
	goTool, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("the go command is needed to build %s: %v", pkg, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := ModuleRoot(tb)
	args := append([]string{"build", "-o", out}, flags...)
	build := exec.CommandContext(ctx, goTool, append(args, pkg)...)
	build.Dir = root
	build.Env = env
	if b, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	return out
}

// ModuleRoot returns the directory of this module's go.mod.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		tb.Fatalf("finding the module root with go env GOMOD: %q, %v", out, err)
	}
	return filepath.Dir(mod)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	// The port is free when it is read, not when its user binds it: a
	// parallel test's next call must not be handed the same one.
	for range 64 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	tb.Fatal("no free port that this test binary has not handed out already in 64 tries")
	return 0
}

// handedOut are the ports FreePort returned in this process.
var handedOut = struct {
	mu    sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ShellQuote quotes s for the remote login shell that runs a command.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SyncBuffer is a concurrency-safe writer.
type SyncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
