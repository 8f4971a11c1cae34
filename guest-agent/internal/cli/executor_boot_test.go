package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// netns is a goroutine locked to an OS thread that lives in a network
// namespace of its own, with loopback up: sockets it opens and processes
// it starts are in that namespace, where the box's fixed ports (22 and
// Executor's 4788) are free whatever else runs on this machine.
type netns struct{ work chan func() }

func newNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; this test needs a network namespace")
		}
		t.Skip("a network namespace needs root")
	}
	n := &netns{work: make(chan func())}
	ready := make(chan error)
	go func() {
		// Never unlocked: the thread ends with this goroutine, so no other
		// goroutine ever runs in the namespace.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- fmt.Errorf("loopback up: %w", err)
			return
		}
		ready <- nil
		for f := range n.work {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(n.work) })
	return n
}

// do runs f in the namespace and waits for it.
func (n *netns) do(f func()) {
	done := make(chan struct{})
	n.work <- func() { defer close(done); f() }
	<-done
}

// loopbackUp sets IFF_UP on lo with SIOCGIFFLAGS/SIOCSIFFLAGS.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name[16], then the flags (short)
	copy(ifr[:], "lo")
	ioctl := func(req uintptr) error {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
			return e
		}
		return nil
	}
	if err := ioctl(syscall.SIOCGIFFLAGS); err != nil {
		return err
	}
	binary.NativeEndian.PutUint16(ifr[16:], binary.NativeEndian.Uint16(ifr[16:])|syscall.IFF_UP)
	return ioctl(syscall.SIOCSIFFLAGS)
}

// executorBox boots the agent on a temp root in a network namespace with
// the box's own program table (no --table), Executor enabled for image:
// the stand-ins play sshd and Hermes, the test binary plays the agent that
// the executor program runs, and the registry listens in the namespace.
type executorBox struct {
	root   string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func startExecutorBox(t *testing.T, ns *netns, reg *ocitest.Registry, image string) *executorBox {
	t.Helper()
	root, _ := bootRoot(t, "127.0.0.1:22")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr/sbin/sshd", "usr/local/bin/hermes"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(exe, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	agent := filepath.Join(root, boxlayout.AgentPath)
	if err := os.MkdirAll(filepath.Dir(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "agent-standin.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, script, 0o755); err != nil {
		t.Fatal(err)
	}
	return launchExecutorBox(t, ns, reg, root, image)
}

// restartExecutorBox boots the stopped box old again, for image.
func restartExecutorBox(t *testing.T, ns *netns, reg *ocitest.Registry, old *executorBox, image string) *executorBox {
	t.Helper()
	return launchExecutorBox(t, ns, reg, old.root, image)
}

func launchExecutorBox(t *testing.T, ns *netns, reg *ocitest.Registry, root, image string) *executorBox {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := &executorBox{root: root, stderr: &bytes.Buffer{}}
	b.cmd = exec.CommandContext(t.Context(), exe, "--root", root, "boot")
	b.cmd.Env = append(os.Environ(), agentMainEnv+"=1", helperEnv+"=standin",
		"HBX_TEST_AGENT="+exe, "HBX_TEST_ROOT="+root, "SSL_CERT_FILE="+reg.CAFile(),
		boxlayout.EnvExecutorEnabled+"=true", boxlayout.EnvExecutorImage+"="+image, boxlayout.EnvExecutorHostPort+"=14788")
	b.cmd.Stderr = b.stderr
	stopGently(b.cmd)
	ns.do(func() { err = b.cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			b.cmd.Process.Signal(syscall.SIGTERM)
			b.cmd.Wait()
		}
		if left := processesUnder(root); len(left) > 0 {
			t.Errorf("the stopped agent left its services running: %q", left)
		}
	})
	return b
}

// processesUnder lists the command lines of live processes whose executable
// path lies under root (the services of a booted test agent).
func processesUnder(root string) []string {
	var left []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.HasPrefix(string(b), root+"/") {
			left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}

// report polls health --json through the relay until cond holds.
func waitHealth(t *testing.T, root, what string, cond func(*health.Report) bool) *health.Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r health.Report
		if code := relayJSON(t, root, &r, "health", "--json"); code == 0 && cond(&r) {
			return &r
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last report %+v", what, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// executorRegistry serves stand-in Executor images of both layouts from a
// registry inside a fresh network namespace, where boot's fixed ports are
// free, and returns the namespace, the registry and each image's pinned
// reference: the workspace layout under the legacy namespace, the packaged
// one under the current one.
func executorRegistry(t *testing.T) (*netns, *ocitest.Registry, map[oci.Layout]string) {
	t.Helper()
	ns := newNetns(t)
	var ln net.Listener
	var err error
	ns.do(func() { ln, err = net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	reg := ocitest.NewRegistry(t, ln)
	bun := readStandinBun(t)
	refs := map[oci.Layout]string{
		oci.LayoutWorkspace: reg.Push(t, "rhyssullivan/executor-selfhost:v1.5.12", ocitest.ExecutorImage(t, runtime.GOARCH, bun), nil),
		oci.LayoutPackaged:  reg.Push(t, "usefulsoftwareco/executor-selfhost:v1.5.35", ocitest.PackagedExecutorImage(t, runtime.GOARCH, bun), nil),
	}
	return ns, reg, refs
}

// standinRecord is what the stand-in bun recorded when it started.
type standinRecord struct {
	PID  int
	Argv []string
	Cwd  string
	Env  []string
}

// checkExecutorRuns waits for every program to run and the executor-api
// check to pass, then checks that the supervised process is the active
// release's own bun running layout's entry, in its selfhost dir, with
// exactly the program's environment.
func checkExecutorRuns(t *testing.T, b *executorBox, ref string, layout oci.Layout) (*oci.Release, standinRecord) {
	t.Helper()
	data := filepath.Join(b.root, boxlayout.ExecutorDataDir)
	var got standinRecord
	svcs := waitServices(t, b.root, "every program RUNNING with a fresh stand-in record", func(m map[string]health.Service) bool {
		if len(m) != 3 || m["sshd"].State != health.ServiceRunning || m["hermes"].State != health.ServiceRunning || m["executor"].State != health.ServiceRunning {
			return false
		}
		raw, err := os.ReadFile(filepath.Join(data, "standin.json"))
		return err == nil && json.Unmarshal(raw, &got) == nil && got.PID == m["executor"].PID
	})
	r := waitHealth(t, b.root, "the executor-api check healthy", func(r *health.Report) bool {
		return r.Checks[health.CheckExecutor].Status == health.StatusHealthy
	})
	// The test root installs no Hermes, Node, tmux or Codex: their tool
	// checks fail here; every other check, the Executor's image included,
	// is healthy.
	tools := map[health.Code]bool{}
	for _, tc := range toolChecks() {
		tools[tc.Code] = true
	}
	for code, c := range r.Checks {
		if !tools[code] && c.Severity != health.SeverityInfo && c.Status != health.StatusHealthy {
			t.Errorf("check %s: %+v", code, c)
		}
	}
	if c := r.Checks[health.CheckExecutorImage]; c.Status != health.StatusHealthy || !strings.Contains(c.Message, ref) {
		t.Errorf("executor-image check: %+v (image %s)", c, ref)
	}
	cur, err := (&oci.Store{Root: filepath.Join(b.root, boxlayout.ExecutorRuntimeDir)}).Current()
	if err != nil || cur == nil || cur.ImageReference != ref || cur.Layout != layout {
		t.Fatalf("current release %+v (%v), want %s in the %s layout", cur, err, ref, layout)
	}
	wantEnv := []string{"BUN_FEATURE_FLAG_DISABLE_IPV6=1", "DO_NOT_TRACK=1", "EXECUTOR_ALLOW_LOCAL_NETWORK=false", "EXECUTOR_ALLOW_STDIO_MCP=false", "EXECUTOR_DATA_DIR=" + data,
		"EXECUTOR_DISABLE_ANALYTICS=1", "EXECUTOR_HOST=0.0.0.0", "EXECUTOR_WEB_BASE_URL=http://localhost:14788", "HOME=/home/hermes", "PATH=/usr/local/bin:/usr/bin:/bin", "PORT=4788"}
	wantArgv := []string{filepath.Join(cur.Dir, "usr/local/bin/bun"), "run", layout.Entry()}
	if got.PID != svcs["executor"].PID || got.Cwd != filepath.Join(cur.Dir, "app/apps/host-selfhost") || !slices.Equal(got.Env, wantEnv) ||
		!slices.Equal(got.Argv, wantArgv) {
		t.Fatalf("bun ran as pid %d (supervised pid %d) in %s as %v with\n%v\nwant %v with\n%v", got.PID, svcs["executor"].PID, got.Cwd, got.Argv, got.Env, wantArgv, wantEnv)
	}
	return cur, got
}

// stopBox ends boot and checks Executor went with it.
func stopBox(t *testing.T, b *executorBox, pid int) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("boot: %v\n%s", err, b.stderr)
	}
	if alive(pid) {
		t.Fatal("Executor outlived boot")
	}
}

// TestBootRunsExecutor pulls, verifies, installs and runs each layout's
// image under the supervisor.
func TestBootRunsExecutor(t *testing.T) {
	ns, reg, refs := executorRegistry(t)
	for _, layout := range []oci.Layout{oci.LayoutWorkspace, oci.LayoutPackaged} {
		t.Run(string(layout), func(t *testing.T) {
			b := startExecutorBox(t, ns, reg, refs[layout])
			_, got := checkExecutorRuns(t, b, refs[layout], layout)
			if code, out, errs := run(t, request("logs", "executor", "-n", "50"), "--root", b.root, "relay"); code != 0 || !strings.Contains(out, "standin bun: serving on port 4788") {
				t.Fatalf("logs executor: exit %d %q %s", code, out, errs)
			}
			stopBox(t, b, got.PID)
		})
	}
}

// TestBootSwitchesExecutorLayout boots a box on the workspace-layout
// image, then again on the packaged one, then back: each boot activates
// its image by one rename of `current` (the other release stays for a
// rollback) and runs that release's bun with its layout's entry.
func TestBootSwitchesExecutorLayout(t *testing.T) {
	ns, reg, refs := executorRegistry(t)
	b := startExecutorBox(t, ns, reg, refs[oci.LayoutWorkspace])
	first, got := checkExecutorRuns(t, b, refs[oci.LayoutWorkspace], oci.LayoutWorkspace)
	stopBox(t, b, got.PID)

	b = restartExecutorBox(t, ns, reg, b, refs[oci.LayoutPackaged])
	second, got := checkExecutorRuns(t, b, refs[oci.LayoutPackaged], oci.LayoutPackaged)
	if second.Name == first.Name {
		t.Fatal("the packaged image did not get a release of its own")
	}
	rs, err := (&oci.Store{Root: filepath.Join(b.root, boxlayout.ExecutorRuntimeDir)}).Releases()
	if err != nil || len(rs) != 2 {
		t.Fatalf("releases after the switch: %+v %v; want both (the previous one kept for a rollback)", rs, err)
	}
	stopBox(t, b, got.PID)

	gets := reg.AllBlobGets()
	b = restartExecutorBox(t, ns, reg, b, refs[oci.LayoutWorkspace])
	back, got := checkExecutorRuns(t, b, refs[oci.LayoutWorkspace], oci.LayoutWorkspace)
	if back.Name != first.Name || reg.AllBlobGets() != gets {
		t.Fatalf("switching back: release %s (first %s), %d blob GETs (before %d); want the kept release, no download", back.Name, first.Name, reg.AllBlobGets(), gets)
	}
	stopBox(t, b, got.PID)
}

func TestBootExecutorBadDigest(t *testing.T) {
	ns, reg, refs := executorRegistry(t)
	b := startExecutorBox(t, ns, reg, badDigest(refs[oci.LayoutPackaged]))

	waitServices(t, b.root, "executor backing off after a failed pull", func(m map[string]health.Service) bool {
		st := m["executor"]
		return m["sshd"].State == health.ServiceRunning && (st.State == health.ServiceBackoff || st.State == health.ServiceFatal) && st.Restarts >= 1
	})
	r := waitHealth(t, b.root, "the executor-api check unhealthy", func(r *health.Report) bool {
		return r.Checks[health.CheckExecutor].Status == health.StatusUnhealthy
	})
	if r.Status != health.StatusUnhealthy || r.Checks[health.CheckSupervisor].Status == health.StatusHealthy {
		t.Errorf("report %s, supervisor check %+v", r.Status, r.Checks[health.CheckSupervisor])
	}
	code, out, _ := run(t, request("logs", "executor", "-n", "20"), "--root", b.root, "relay")
	if code != 0 || !strings.Contains(out, "executor run: pulling ") || !strings.Contains(strings.ToLower(out), "unknown manifest") {
		t.Fatalf("the executor log does not say why: %q", out)
	}
	if _, err := os.Lstat(filepath.Join(b.root, boxlayout.ExecutorRuntimeDir, "current")); err == nil {
		t.Fatal("a release was activated")
	}
}
