package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// binaries are built once per test binary.
var (
	buildOnce sync.Once
	bins      struct{ dir, hermesBox, agent, helper, testAgent string }
	buildErr  error
)

// buildBinaries builds hermes-box, the real agent, the test agent (linked
// to the real agent) and the fake smolvm, installed as `smolvm`.
func buildBinaries(t testing.TB) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hermes-box-cli-test-")
		if err != nil {
			buildErr = err
			return
		}
		bins.dir = dir
		bins.hermesBox = sshdtest.GoBuild(t, filepath.Join(dir, "hermes-box"), "./host")
		bins.agent = sshdtest.GoBuild(t, filepath.Join(dir, "agent", "hermes-box-agent"), "./guest-agent")
		// The Executor helper beside the agent, where the agent looks for it.
		bins.helper = sshdtest.GoBuild(t, filepath.Join(dir, "agent", "hermes-box-agent-oci"), "./guest-agent/cmd/hermes-box-agent-oci")
		bins.testAgent = sshdtest.GoBuild(t, filepath.Join(dir, "testagent"), "./tests/testagent",
			"-ldflags", "-X main.realAgent="+bins.agent)
		sshdtest.GoBuild(t, filepath.Join(dir, "path", "smolvm"), "./tests/fakesmolvm")
		exe, err := os.Executable()
		if err == nil {
			err = os.Symlink(exe, filepath.Join(dir, "path", guestProgram))
		}
		if err != nil {
			buildErr = err
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == guestProgram {
		os.Exit(guestMain(os.Args[1:]))
	}
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// harness is a project, a fake smolvm and Debian's sshd standing in for the
// box's sshd: the fake's published SSH port forwards to it.
type harness struct {
	t       testing.TB
	root    string // the project root (and data dir)
	state   string // the fake smolvm's state
	log     string // the fake's argv log
	images  string // the fake's seed images
	sshd    *sshdtest.Server
	port    int // HERMES_BOX_SSH_PORT
	env     []string
	extra   []string // per-call environment
	conf    []string // hermes-box.conf lines
	agentFn string   // the agent binary's name under bin/
}

const (
	machine = "hermes-box"
	builder = "hermes-builder"
)

func newHarness(t testing.TB, conf ...string) *harness {
	t.Helper()
	buildBinaries(t)
	h := &harness{t: t, root: t.TempDir(), conf: conf, agentFn: "hermes-box-agent-linux-" + runtime.GOARCH}
	// Short: the agent's control socket lives under a machine's root, and
	// a unix socket's path has at most 107 bytes.
	state, err := os.MkdirTemp("", "hbx")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(state) })
	h.state = filepath.Join(state, "s")
	h.log = filepath.Join(h.state, "argv.jsonl")
	h.images = filepath.Join(t.TempDir(), "images")
	seed := filepath.Join(h.images, "ubuntu_24.04")
	h.sshd = sshdtest.New(t, sshdtest.Options{
		KeyPath:     filepath.Join(h.root, "state", "hermes-box-ed25519"),
		HostKeyPath: filepath.Join(seed, "etc", "ssh", "ssh_host_ed25519_key"),
		NoAgent:     true,
	})
	h.port = sshdtest.FreePort(t)
	h.write("Smolfile", h.moduleFile("Smolfile"))
	h.write("bin/"+h.agentFn, readFile(t, bins.testAgent))
	must(t, os.Chmod(filepath.Join(h.root, "bin", h.agentFn), 0o755))
	// The Executor helper: the agent with the executor verb in-process.
	h.write("bin/hermes-box-agent-oci-linux-"+runtime.GOARCH, readFile(t, bins.helper))
	lines := append([]string{"HERMES_BOX_SSH_PORT=" + strconv.Itoa(h.port)}, conf...)
	h.write("hermes-box.conf", strings.Join(lines, "\n")+"\n")
	table := filepath.Join(t.TempDir(), "boot-table.json")
	writeBootTable(t, table)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMES_BOX_") && !strings.HasPrefix(kv, "SMOLVM_") && !strings.HasPrefix(kv, "FAKESMOLVM_") {
			h.env = append(h.env, kv)
		}
	}
	h.env = append(h.env,
		"PATH="+filepath.Join(bins.dir, "path")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKESMOLVM_STATE="+h.state, "FAKESMOLVM_LOG="+h.log, "FAKESMOLVM_IMAGES="+h.images,
		"FAKESMOLVM_BOOT_TABLE="+table,
		// The fake stops its machines' processes if this test binary dies
		// without its cleanups.
		"FAKESMOLVM_OWNER_PID="+strconv.Itoa(os.Getpid()),
		"HERMES_BOX_PROJECT_ROOT="+h.root,
		"HBX_TEST_HOST=supported", "HBX_TEST_TIMING=fast", "HBX_TEST_SSH_USER="+h.sshd.User,
		"HBX_TEST_RELAY_COMMAND="+guestRelayCommand,
		// The stand-in Hermes has no approval gate to provision.
		"HBX_TEST_NO_GATE=stand-in",
	)
	t.Cleanup(h.stopMachines)
	return h
}

func (h *harness) moduleFile(name string) string {
	return string(readFile(h.t, filepath.Join(sshdtest.ModuleRoot(h.t), name)))
}

func (h *harness) write(rel string, content any) {
	h.t.Helper()
	p := filepath.Join(h.root, rel)
	must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	var b []byte
	switch c := content.(type) {
	case string:
		b = []byte(c)
	case []byte:
		b = c
	}
	must(h.t, os.WriteFile(p, b, 0o644))
}

// seed writes a file into the builder's seed image under .testagent.
func (h *harness) seed(name, content string) {
	h.t.Helper()
	p := filepath.Join(h.images, "ubuntu_24.04", ".testagent", name)
	must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(h.t, os.WriteFile(p, []byte(content), 0o644))
}

// result is one run of hermes-box.
type result struct {
	code           int
	stdout, stderr string
	calls          []call // the smolvm calls this run made
	maxRSSKiB      int64  // the peak resident set of hermes-box itself (VmHWM, KiB; 0 without /proc)
	treeRSSKiB     int64  // the rusage peak, which counts the children it waited for (Linux: KiB)
	elapsed        time.Duration
}

// run runs hermes-box with args; the smolvm calls it made are returned.
func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runInput("", args...)
}

// runLimit bounds one run of hermes-box: past the longest deadline of an
// agent verb that a hostile test waits for (5 min) and its slack.
const runLimit = 8 * time.Minute

// runInput is run with stdin.
func (h *harness) runInput(stdin string, args ...string) result {
	h.t.Helper()
	before := len(h.calls())
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
		go func() { defer close(done); hwm = watchHWM(cmd.Process.Pid, stop) }()
		err = cmd.Wait()
		close(stop)
		<-done
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), calls: h.calls()[before:], elapsed: time.Since(start), maxRSSKiB: hwm}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.treeRSSKiB = int64(ru.Maxrss)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("running hermes-box %v: %v", args, err)
	}
	return r
}

// command is hermes-box with args in the harness's environment.
func (h *harness) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bins.hermesBox, args...)
	cmd.Env = append(append([]string(nil), h.env...), h.extra...)
	return cmd
}

// watchHWM reads the peak resident set (VmHWM) of pid every 10 ms until
// stop closes or the process is gone, and returns the last value read.
func watchHWM(pid int, stop <-chan struct{}) int64 {
	var hwm int64
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return hwm
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil && n > hwm {
					hwm = n
				}
			}
		}
		select {
		case <-stop:
			return hwm
		case <-t.C:
		}
	}
}

// call is one recorded smolvm invocation, paths normalised.
type call struct {
	line string
	env  map[string]string
}

var tmpSuffix = regexp.MustCompile(`hermes-base\.tmp-[0-9]+`)

func (h *harness) calls() []call {
	h.t.Helper()
	f, err := os.Open(h.log)
	if os.IsNotExist(err) {
		return nil
	}
	must(h.t, err)
	defer f.Close()
	var out []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Argv []string          `json:"argv"`
			Env  map[string]string `json:"env"`
		}
		must(h.t, json.Unmarshal(sc.Bytes(), &e))
		line := strings.Join(e.Argv, " ")
		line = strings.ReplaceAll(line, h.root, "$ROOT")
		line = tmpSuffix.ReplaceAllString(line, "hermes-base.tmp-PID")
		out = append(out, call{line: line, env: e.Env})
	}
	return out
}

func lines(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.line
	}
	return out
}

// started is a machine's start as hermes-box calls it on Linux: the start,
// then the status that gives the VMM's pid for the confinement check.
func started(name string) []string {
	return []string{"machine start --name " + name, "machine status --name " + name + " --json"}
}

// expectCalls compares the exact argv sequence.
func expectCalls(t testing.TB, got []call, want []string) {
	t.Helper()
	g := lines(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("smolvm calls differ\n got:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// machines returns the fake's machines and their states.
func (h *harness) machines() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(filepath.Join(h.state, "machines"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(h.state, "machines", e.Name(), "machine.json"))
		if err != nil {
			continue
		}
		var r struct{ State string }
		must(h.t, json.Unmarshal(b, &r))
		out[e.Name()] = r.State
	}
	return out
}

// stopMachines stops the fake's machines left running (their entrypoints
// and forwarders) with the fake itself.
func (h *harness) stopMachines() {
	for name, state := range h.machines() {
		if state != "running" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "path", "smolvm"), "machine", "stop", "--name", name)
		cmd.Env = append(append([]string(nil), h.env...), "FAKESMOLVM_LOG=")
		if out, err := cmd.CombinedOutput(); err != nil {
			h.t.Logf("stopping %s: %v %s", name, err, out)
		}
		cancel()
	}
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// initCalls is the exact smolvm conversation of a successful init with
// one netcheck.
func (h *harness) initCalls() []string {
	return append(append([]string{"--version"}, h.helpCalls()...),
		"machine ls --json",
		"machine create --name hermes-builder --image ubuntu:24.04 --cpus 4 --mem 8192 --storage 15 --overlay 6 --net --net-backend virtio-net",
		"machine update --name hermes-builder --net",
		"machine start --name hermes-builder",
		"machine status --name hermes-builder --json", // the VMM's confinement
		"machine cp $ROOT/bin/"+h.agentFn+" hermes-builder:/usr/local/sbin/hermes-box-agent",
		"machine exec --name hermes-builder -- /bin/chmod 0755 /usr/local/sbin/hermes-box-agent",
		"machine cp $ROOT/state/hermes-box-ed25519.pub hermes-builder:/tmp/hermes-box-authorized-keys",
		"machine exec --stream --name hermes-builder --timeout 5s -- /usr/local/sbin/hermes-box-agent netcheck",
		// provision is not a relay verb: it runs directly.
		"machine exec --stream --name hermes-builder -- /usr/local/sbin/hermes-box-agent provision --authorized-keys /tmp/hermes-box-authorized-keys --hermes-commit "+pins.DefaultHermesCommit,
		"machine stop --name hermes-builder",
		"pack create --from-vm hermes-builder --smolfile $ROOT/Smolfile --output $ROOT/images/hermes-base.tmp-PID",
		"machine ls --json",
		"machine delete --name hermes-builder --force",
		fmt.Sprintf("machine create --name hermes-box --from $ROOT/images/hermes-base.smolmachine --cpus 4 --mem 8192 --storage 15 --overlay 6 -p %d:22 -e HERMES_BOX_EXECUTOR_ENABLED=false -e HERMES_BOX_EXECUTOR_IMAGE=ghcr.io/usefulsoftwareco/executor-selfhost:v1.6.8@sha256:527e014ce0641e9d569314561fba2a37b872ffd5074471b9bc48b66611ecb090 -e HERMES_BOX_EXECUTOR_HOST_PORT=4788 --net", h.port),
		"machine data-dir --name hermes-box",
		"machine update --name hermes-box --net",
		"machine start --name hermes-box",
		"machine status --name hermes-box --json",
		"machine exec --stream --name hermes-box -- /usr/local/sbin/hermes-box-agent hostkeys",
	)
}

// helpCalls are the help texts read when hermes-box first drives a smolvm
// binary: every subcommand it passes flags to that the release has
// (machine egress-events from 1.8.1; the fake's default release is 1.0.4).
func (h *harness) helpCalls() []string {
	release := "1.0.4"
	for _, kv := range slices.Concat(h.env, h.extra) {
		if v, ok := strings.CutPrefix(kv, "FAKESMOLVM_VERSION="); ok {
			release = v
		}
	}
	calls := []string{"machine create --help", "machine data-dir --help", "machine delete --help"}
	if release != "1.0.4" {
		calls = append(calls, "machine egress-events --help")
	}
	return append(calls, "machine exec --help", "machine ls --help", "machine shell --help", "machine start --help",
		"machine status --help", "machine stop --help", "machine update --help", "pack create --help")
}
