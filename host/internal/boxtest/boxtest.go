//go:build !hbxrelease

// Package boxtest stands a project up for the lifecycle tests of
// host/internal/box (which drive its verbs in-process) and of
// host/internal/cli (which run the hermes-box binary): a project root, the
// fake smolvm (tests/fakesmolvm, faithful to smolvm's contract) whose
// machines run the real agent's boot, and Debian's sshd standing in for
// each machine's sshd. A test package's TestMain calls Main, so that the
// test binary can also stand in for the box's programs (guest.go).
package boxtest

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
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Machine and Builder are the machine names of a test project.
const (
	Machine = "hermes-box"
	Builder = "hermes-builder"
)

// Binaries are the programs the tests build once per test binary.
type Binaries struct {
	Dir       string // holds them all (removed by Main)
	Agent     string // the real hermes-box-agent
	Helper    string // the Executor helper beside it
	TestAgent string // the test agent, linked to the real agent
	Smolvm    string // the fake smolvm, on the PATH of every project
}

var (
	buildOnce sync.Once
	bins      Binaries
	buildErr  error
)

// Build builds the real agent, its Executor helper, the test agent and the
// fake smolvm (installed as `smolvm` in Dir/path, with this test binary
// beside it as the guest programs).
func Build(t testing.TB) *Binaries {
	t.Helper()
	sshdtest.SkipShort(t, "builds the agent, the test agent and the fake smolvm")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hermes-box-test-")
		if err != nil {
			buildErr = err
			return
		}
		bins.Dir = dir
		bins.Agent = sshdtest.GoBuild(t, filepath.Join(dir, "agent", "hermes-box-agent"), "./guest-agent")
		// The Executor helper beside the agent, where the agent looks for it.
		bins.Helper = sshdtest.GoBuild(t, filepath.Join(dir, "agent", "hermes-box-agent-oci"), "./guest-agent/cmd/hermes-box-agent-oci")
		bins.TestAgent = sshdtest.GoBuild(t, filepath.Join(dir, "testagent"), "./tests/testagent",
			"-ldflags", "-X main.realAgent="+bins.Agent)
		bins.Smolvm = sshdtest.GoBuild(t, filepath.Join(dir, "path", "smolvm"), "./tests/fakesmolvm")
		exe, err := os.Executable()
		if err == nil {
			err = os.Symlink(exe, filepath.Join(dir, "path", GuestProgram))
		}
		if err != nil {
			buildErr = err
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return &bins
}

// Main is a test binary's TestMain: this binary run as GuestProgram is a
// guest program; otherwise it runs the tests and removes what Build built.
func Main(m *testing.M) int {
	if filepath.Base(os.Args[0]) == GuestProgram {
		return guestMain(os.Args[1:])
	}
	code := m.Run()
	if bins.Dir != "" {
		os.RemoveAll(bins.Dir)
	}
	return code
}

// Project is a project, a fake smolvm and Debian's sshd standing in for the
// box's sshd: the fake's published SSH port forwards to it.
type Project struct {
	T       testing.TB
	Root    string // the project root (and data dir)
	State   string // the fake smolvm's state
	Log     string // the fake's argv log
	Images  string // the fake's seed images
	SSHD    *sshdtest.Server
	Port    int // HERMES_BOX_SSH_PORT
	Env     []string
	Extra   []string // per-call environment
	Conf    []string // hermes-box.conf lines
	AgentFn string   // the agent binary's name under bin/
}

// New stands up a project whose hermes-box.conf holds conf.
func New(t testing.TB, conf ...string) *Project {
	t.Helper()
	b := Build(t)
	p := &Project{T: t, Root: t.TempDir(), Conf: conf, AgentFn: "hermes-box-agent-linux-" + runtime.GOARCH}
	// Short: the agent's control socket lives under a machine's root, and
	// a unix socket's path has at most 107 bytes.
	state, err := os.MkdirTemp("", "h")
	Must(t, err)
	t.Cleanup(func() { os.RemoveAll(state) })
	p.State = state
	p.Log = filepath.Join(p.State, "argv.jsonl")
	p.Images = filepath.Join(t.TempDir(), "images")
	seed := filepath.Join(p.Images, "ubuntu_24.04")
	p.SSHD = sshdtest.New(t, sshdtest.Options{
		KeyPath:     filepath.Join(p.Root, "state", "hermes-box-ed25519"),
		HostKeyPath: filepath.Join(seed, "etc", "ssh", "ssh_host_ed25519_key"),
		NoAgent:     true,
	})
	p.Port = sshdtest.FreePort(t)
	p.Write("Smolfile", p.ModuleFile("Smolfile"))
	p.Write("bin/"+p.AgentFn, ReadFile(t, b.TestAgent))
	Must(t, os.Chmod(filepath.Join(p.Root, "bin", p.AgentFn), 0o755))
	// The Executor helper: the agent with the executor verb in-process.
	p.Write("bin/hermes-box-agent-oci-linux-"+runtime.GOARCH, ReadFile(t, b.Helper))
	lines := append([]string{"HERMES_BOX_SSH_PORT=" + strconv.Itoa(p.Port)}, conf...)
	p.Write("hermes-box.conf", strings.Join(lines, "\n")+"\n")
	table := filepath.Join(t.TempDir(), "boot-table.json")
	writeBootTable(t, table)
	for _, kv := range os.Environ() {
		if !ownVariable(kv) {
			p.Env = append(p.Env, kv)
		}
	}
	p.Env = append(p.Env,
		"PATH="+filepath.Dir(b.Smolvm)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKESMOLVM_STATE="+p.State, "FAKESMOLVM_LOG="+p.Log, "FAKESMOLVM_IMAGES="+p.Images,
		"FAKESMOLVM_BOOT_TABLE="+table,
		// The fake stops its machines' processes if this test binary dies
		// without its cleanups.
		"FAKESMOLVM_OWNER_PID="+strconv.Itoa(os.Getpid()),
		"HERMES_BOX_PROJECT_ROOT="+p.Root,
		"HBX_TEST_HOST=supported", "HBX_TEST_TIMING=fast", "HBX_TEST_SSH_USER="+p.SSHD.User,
		"HBX_TEST_RELAY_COMMAND="+GuestRelayCommand,
		// doctor probes the fake's LAN (TEST-NET-1), never the real one.
		"HBX_TEST_LAN_GATEWAY=192.0.2.1",
		// The test agent's provision installs Hermes with its gate.
		GatedHermesEnv+"="+GatedHermes(t),
	)
	t.Cleanup(p.StopMachines)
	return p
}

// ownVariable reports a variable the project sets (or clears) itself.
func ownVariable(kv string) bool {
	return strings.HasPrefix(kv, "HERMES_BOX_") || strings.HasPrefix(kv, "SMOLVM_") || strings.HasPrefix(kv, "FAKESMOLVM_")
}

// Setenv makes the project's environment (and Extra) this process's for
// the rest of the test, for tests that run the box's verbs in-process:
// the variables of a caller's own environment that the project leaves out
// are unset.
func (p *Project) Setenv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); ownVariable(kv) {
			t.Setenv(k, "")
			Must(t, os.Unsetenv(k))
		}
	}
	for _, kv := range slices.Concat(p.Env, p.Extra) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// ModuleFile is the content of a file at the module's root.
func (p *Project) ModuleFile(name string) string {
	return string(ReadFile(p.T, filepath.Join(sshdtest.ModuleRoot(p.T), name)))
}

// Write writes content (a string or bytes) to rel under the project root.
func (p *Project) Write(rel string, content any) {
	p.T.Helper()
	path := filepath.Join(p.Root, rel)
	Must(p.T, os.MkdirAll(filepath.Dir(path), 0o755))
	var b []byte
	switch c := content.(type) {
	case string:
		b = []byte(c)
	case []byte:
		b = c
	}
	Must(p.T, os.WriteFile(path, b, 0o644))
}

// Seed writes a file into the builder's seed image under .testagent.
func (p *Project) Seed(name, content string) {
	p.T.Helper()
	path := filepath.Join(p.Images, "ubuntu_24.04", ".testagent", name)
	Must(p.T, os.MkdirAll(filepath.Dir(path), 0o755))
	Must(p.T, os.WriteFile(path, []byte(content), 0o644))
}

// Call is one recorded smolvm invocation, paths normalised.
type Call struct {
	Line string
	Env  map[string]string
}

var tmpSuffix = regexp.MustCompile(`hermes-base\.tmp-[0-9]+`)

// Calls are the smolvm invocations recorded so far.
func (p *Project) Calls() []Call {
	p.T.Helper()
	f, err := os.Open(p.Log)
	if os.IsNotExist(err) {
		return nil
	}
	Must(p.T, err)
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Argv []string          `json:"argv"`
			Env  map[string]string `json:"env"`
		}
		Must(p.T, json.Unmarshal(sc.Bytes(), &e))
		line := strings.Join(e.Argv, " ")
		line = strings.ReplaceAll(line, p.Root, "$ROOT")
		line = tmpSuffix.ReplaceAllString(line, "hermes-base.tmp-PID")
		out = append(out, Call{Line: line, Env: e.Env})
	}
	return out
}

// Lines are the argv lines of calls.
func Lines(calls []Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Line
	}
	return out
}

// Started is a machine's start as hermes-box calls it on Linux: the start,
// then the status that gives the VMM's pid for the confinement check.
func Started(name string) []string {
	return []string{"machine start --name " + name, "machine status --name " + name + " --json"}
}

// ExpectCalls compares the exact argv sequence.
func ExpectCalls(t testing.TB, got []Call, want []string) {
	t.Helper()
	g := Lines(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("smolvm calls differ\n got:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// Machines returns the fake's machines and their states.
func (p *Project) Machines() map[string]string {
	p.T.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(filepath.Join(p.State, "machines"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(p.State, "machines", e.Name(), "machine.json"))
		if err != nil {
			continue
		}
		var r struct{ State string }
		Must(p.T, json.Unmarshal(b, &r))
		out[e.Name()] = r.State
	}
	return out
}

// StopMachines stops the fake's machines left running (their entrypoints
// and forwarders) with the fake itself.
func (p *Project) StopMachines() {
	for name, state := range p.Machines() {
		if state != "running" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bins.Smolvm, "machine", "stop", "--name", name)
		cmd.Env = append(append([]string(nil), p.Env...), "FAKESMOLVM_LOG=")
		if out, err := cmd.CombinedOutput(); err != nil {
			p.T.Logf("stopping %s: %v %s", name, err, out)
		}
		cancel()
	}
}

// GuestExec runs a command in a machine through the fake smolvm (not
// recorded), with stdin.
func (p *Project) GuestExec(name, stdin string, argv ...string) string {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"machine", "exec", "-i", "--name", name, "--"}, argv...)
	cmd := exec.CommandContext(ctx, bins.Smolvm, args...)
	cmd.Env = append(append([]string(nil), p.Env...), "FAKESMOLVM_LOG=")
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		p.T.Fatalf("smolvm %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// Note is a file in the box's workspace that the backup tests change.
const Note = "/workspace/work/note.txt"

// WriteNote writes text to the box's Note.
func (p *Project) WriteNote(text string) { p.GuestExec(Machine, text, "/usr/bin/tee", Note) }

// ReadNote reads the box's Note.
func (p *Project) ReadNote() string {
	p.T.Helper()
	return string(ReadFile(p.T, filepath.Join(p.State, "machines", Machine, "root", Note)))
}

// Index is the position of the first call matching re, -1 when none does.
func Index(calls []Call, re string) int {
	rx := regexp.MustCompile(re)
	for i, c := range calls {
		if rx.MatchString(c.Line) {
			return i
		}
	}
	return -1
}

// CheckReplacement asserts the order of a replacement restore: candidate
// in restore mode on another loopback port, applied, deleted; then the
// original deleted and recreated in restore mode on the box's port.
func (p *Project) CheckReplacement(calls []Call) {
	t := p.T
	t.Helper()
	all := strings.Join(Lines(calls), "\n  ")
	cand := regexp.MustCompile(`^machine create --name (hermes-box-restore-[0-9-]+) --from \$ROOT/images/hermes-base\.smolmachine .*-p ([0-9]+):22 .*-e HERMES_BOX_RESTORE_MODE=true --net$`)
	var name, port string
	created := -1
	for i, c := range calls {
		if m := cand.FindStringSubmatch(c.Line); m != nil {
			name, port, created = m[1], m[2], i
			break
		}
	}
	if created < 0 {
		t.Fatalf("no restore-mode candidate create:\n  %s", all)
	}
	if port == fmt.Sprint(p.Port) {
		t.Errorf("the candidate uses the box's port %s", port)
	}
	applied := Index(calls, `^machine exec --stream -i --name `+name+` -- /usr/local/sbin/hermes-box-agent relay( --hold-output)?$`) // --hold-output on 1.0.4 (TestLifecycleAcrossReleases)
	candDeleted := Index(calls, `^machine delete --name `+name+` --force$`)
	boxDeleted := Index(calls, `^machine delete --name hermes-box --force$`)
	boxCreated := Index(calls, fmt.Sprintf(`^machine create --name hermes-box --from .* -p %d:22 .*-e HERMES_BOX_RESTORE_MODE=true --net$`, p.Port))
	if !(created < applied && applied < candDeleted && candDeleted < boxDeleted && boxDeleted < boxCreated) {
		t.Errorf("replacement order: candidate create %d, apply %d, delete %d; box delete %d, create %d\n  %s",
			created, applied, candDeleted, boxDeleted, boxCreated, all)
	}
	if got := p.Machines(); len(got) != 1 {
		t.Errorf("machines after restore: %v", got)
	}
}

// ReadFile reads p or fails the test.
func ReadFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	Must(t, err)
	return b
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// InitCalls is the exact smolvm conversation of a successful init with
// one netcheck.
func (p *Project) InitCalls() []string {
	return append(append([]string{"--version"}, p.HelpCalls()...),
		"machine ls --json",
		"machine create --name hermes-builder --image ubuntu:24.04 --cpus 4 --mem 8192 --storage 15 --overlay 6 --net --net-backend virtio-net",
		"machine update --name hermes-builder --net",
		"machine start --name hermes-builder",
		"machine status --name hermes-builder --json", // the VMM's confinement
		"machine cp $ROOT/bin/"+p.AgentFn+" hermes-builder:/usr/local/sbin/hermes-box-agent",
		"machine exec --name hermes-builder -- /bin/chmod 0755 /usr/local/sbin/hermes-box-agent",
		"machine cp $ROOT/state/hermes-box-ed25519.pub hermes-builder:/tmp/hermes-box-authorized-keys",
		"machine exec --stream --name hermes-builder --timeout 8s -- /usr/local/sbin/hermes-box-agent netcheck",
		// provision is not a relay verb: it runs directly.
		"machine exec --stream --name hermes-builder -- /usr/local/sbin/hermes-box-agent provision --authorized-keys /tmp/hermes-box-authorized-keys --hermes-commit "+pins.DefaultHermesCommit,
		"machine stop --name hermes-builder",
		"pack create --from-vm hermes-builder --smolfile $ROOT/Smolfile --output $ROOT/images/hermes-base.tmp-PID",
		"machine ls --json",
		"machine delete --name hermes-builder --force",
		fmt.Sprintf("machine create --name hermes-box --from $ROOT/images/hermes-base.smolmachine --cpus 4 --mem 8192 --storage 15 --overlay 6 -p %d:22 -e HERMES_BOX_EXECUTOR_ENABLED=false -e HERMES_BOX_EXECUTOR_IMAGE=ghcr.io/usefulsoftwareco/executor-selfhost:v1.6.8@sha256:527e014ce0641e9d569314561fba2a37b872ffd5074471b9bc48b66611ecb090 -e HERMES_BOX_EXECUTOR_HOST_PORT=4788 --net", p.Port),
		"machine data-dir --name hermes-box",
		"machine update --name hermes-box --net",
		"machine start --name hermes-box",
		"machine status --name hermes-box --json",
		"machine exec --stream --name hermes-box -- /usr/local/sbin/hermes-box-agent hostkeys",
	)
}

// HelpCalls are the help texts read when hermes-box first drives a smolvm
// binary: every subcommand it passes flags to that the release has
// (machine egress-events from 1.8.1; the fake's default release is 1.0.4).
func (p *Project) HelpCalls() []string {
	release := "1.0.4"
	for _, kv := range slices.Concat(p.Env, p.Extra) {
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
