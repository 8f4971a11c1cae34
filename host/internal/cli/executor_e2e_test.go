package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// executorProject is a project whose box has Executor enabled, run by the
// fake smolvm as a machine created from an image (so no entrypoint runs):
// its published SSH port forwards to Debian's sshd, whose relay command is
// the real agent on a temp guest root, and its published Executor port to
// a stand-in answering /api/health.
type executorProject struct {
	t                *testing.T
	root, guest      string
	env              []string
	sshPort, exePort int
	health           *httptest.Server
	ref              string
}

const executorRelease = "7fa62867c34afc3032f654608e94da5eb37d9fd03db32aec36b524a1c23f16b5"

func newExecutorProject(t *testing.T) *executorProject {
	t.Helper()
	buildBinaries(t)
	p := &executorProject{t: t, root: t.TempDir(), guest: t.TempDir(), sshPort: sshdtest.FreePort(t), exePort: sshdtest.FreePort(t)}
	p.ref = "ghcr.io/rhyssullivan/executor-selfhost:v9@sha256:" + strings.Repeat("e", 64)
	state := filepath.Join(p.root, "state")
	sshd := sshdtest.New(t, sshdtest.Options{KeyPath: filepath.Join(state, "hermes-box-ed25519"), NoAgent: true})
	boxtest.Must(t, keys.SaveHostKey(state, boxtest.Machine, sshd.HostKey))
	boxtest.Must(t, os.WriteFile(filepath.Join(p.root, "Smolfile"), boxtest.ReadFile(t, filepath.Join(sshdtest.ModuleRoot(t), "Smolfile")), 0o644))
	conf := fmt.Sprintf("HERMES_BOX_SSH_PORT=%d\nHERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=%d\n", p.sshPort, p.exePort)
	boxtest.Must(t, os.WriteFile(filepath.Join(p.root, "hermes-box.conf"), []byte(conf), 0o644))

	// The guest: an active release as the agent lays it out, and a log.
	rt := filepath.Join(p.guest, "workspace/.hermes-box-runtime/executor")
	rel := filepath.Join(rt, "releases", executorRelease)
	boxtest.Must(t, os.MkdirAll(rel, 0o755))
	for name, value := range map[string]string{".image-reference": p.ref, ".repository-digest": strings.Replace(p.ref, ":v9@", "@", 1),
		".manifest-digest": "sha256:" + executorRelease} {
		boxtest.Must(t, os.WriteFile(filepath.Join(rel, name), []byte(value+"\n"), 0o644))
	}
	boxtest.Must(t, os.Symlink("releases/"+executorRelease, filepath.Join(rt, "current")))
	boxtest.Must(t, os.MkdirAll(filepath.Join(p.guest, "workspace/executor"), 0o755))
	boxtest.Must(t, os.WriteFile(filepath.Join(p.guest, "workspace/executor/executor.log"), []byte("one\ntwo\nthree\n"), 0o644))
	// Hermes with its approval gate, as provisioning leaves it.
	boxtest.Must(t, os.CopyFS(p.guest, os.DirFS(boxtest.GatedHermes(t))))

	p.health = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.health.Close)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMES_BOX_") && !strings.HasPrefix(kv, "SMOLVM_") && !strings.HasPrefix(kv, "FAKESMOLVM_") {
			p.env = append(p.env, kv)
		}
	}
	p.env = append(p.env,
		"PATH="+filepath.Join(bins.Dir, "path")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKESMOLVM_STATE="+filepath.Join(t.TempDir(), "smolvm"),
		"FAKESMOLVM_GUEST_22="+sshd.Addr, "FAKESMOLVM_GUEST_4788="+strings.TrimPrefix(p.health.URL, "http://"),
		"HERMES_BOX_PROJECT_ROOT="+p.root, "HBX_TEST_SSH_USER="+sshd.User,
		"HBX_TEST_RELAY_COMMAND="+sshdtest.ShellQuote(bins.Agent)+" --root "+sshdtest.ShellQuote(p.guest)+" relay",
	)
	t.Cleanup(func() { p.smolvm("machine", "stop", "--name", boxtest.Machine) })
	return p
}

// smolvm runs the fake smolvm on the project's state.
func (p *executorProject) smolvm(args ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Smolvm, args...)
	cmd.Env = p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("smolvm %v: %v\n%s", args, err, out)
	}
}

// boot creates and starts the box; publishExecutor publishes its port.
func (p *executorProject) boot(publishExecutor bool) {
	p.t.Helper()
	args := []string{"machine", "create", "--name", boxtest.Machine, "--image", "ubuntu:24.04", "-p", strconv.Itoa(p.sshPort) + ":22"}
	if publishExecutor {
		args = append(args, "-p", strconv.Itoa(p.exePort)+":4788")
	}
	p.smolvm(append(args, "--net")...)
	p.smolvm("machine", "start", "--name", boxtest.Machine)
}

// run runs the real hermes-box.
func (p *executorProject) run(args ...string) (int, string, string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.hermesBox, args...)
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		p.t.Fatalf("hermes-box %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

type executorStatus struct {
	Enabled       bool
	Machine       string
	State         string
	URL           string
	Healthy       bool
	HealthError   string
	MetadataError string
	Image         string
	ImageDigest   string
}

func (p *executorProject) status() executorStatus {
	p.t.Helper()
	code, out, errs := p.run("executor", "status", "--json")
	var st executorStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		p.t.Fatalf("executor status --json: exit %d %q %s", code, out, errs)
	}
	return st
}

// TestExecutorThroughTheRelay runs `hermes-box executor status --json` and
// `executor logs` through the real binary: smolvm's state, the listener
// check on the published port, Executor's health and the agent's metadata
// over the SSH relay with the pinned host key.
func TestExecutorThroughTheRelay(t *testing.T) {
	t.Parallel()
	p := newExecutorProject(t)
	if st := p.status(); st.State != "missing" || st.Healthy || st.MetadataError != "" {
		t.Fatalf("status without a box: %+v", st)
	}
	p.boot(true)
	st := p.status()
	want := executorStatus{Enabled: true, Machine: boxtest.Machine, State: "running", URL: "http://localhost:" + strconv.Itoa(p.exePort),
		Healthy: true, Image: p.ref, ImageDigest: "sha256:" + executorRelease}
	if st != want {
		t.Fatalf("status %+v\nwant %+v", st, want)
	}
	if code, out, errs := p.run("executor", "logs", "-n", "2"); code != 0 || out != "two\nthree\n" {
		t.Fatalf("executor logs: exit %d %q %s", code, out, errs)
	}
}

// TestExecutorRefusesAnUnpublishedPort: a box whose Executor port has no
// listener is reported, and open refuses, without a request to the port.
func TestExecutorRefusesAnUnpublishedPort(t *testing.T) {
	t.Parallel()
	p := newExecutorProject(t)
	p.boot(false)
	st := p.status()
	if st.State != "running" || st.Healthy || !strings.Contains(st.HealthError, "no listener found") || st.Image != p.ref {
		t.Fatalf("status %+v", st)
	}
	if code, _, errs := p.run("executor", "open"); code == 0 || !strings.Contains(errs, "refusing to use Executor's port") {
		t.Fatalf("open: exit %d: %s", code, errs)
	}
}

// TestExecutorRefusesAForeignListener: while the box runs without its
// Executor port, another process that listens there on loopback (this
// test) is not the box's VMM: status reports it, and open refuses,
// without a request to the port (the MCP commands run the same check).
func TestExecutorRefusesAForeignListener(t *testing.T) {
	t.Parallel()
	p := newExecutorProject(t)
	p.boot(false)
	var asked atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Add(1) }))
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.exePort))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	if st := p.status(); st.Healthy || !strings.Contains(st.HealthError, "held by a process that is not the box's") {
		t.Errorf("status %+v", st)
	}
	for _, args := range [][]string{{"executor", "open"}} {
		if code, _, errs := p.run(args...); code == 0 || !strings.Contains(errs, "refusing to use Executor's port") {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the foreign listener got %d requests", n)
	}
}

// TestInitWithExecutor: init publishes Executor's port and passes its
// settings to the box, the start's listener check covers the port, and
// `executor status --json` then reaches it and the box's agent.
func TestInitWithExecutor(t *testing.T) {
	t.Parallel()
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" {
			http.NotFound(w, r)
		}
	}))
	defer health.Close()
	port := sshdtest.FreePort(t)
	h := newHarness(t, "HERMES_BOX_EXECUTOR_ENABLED=true", "HERMES_BOX_EXECUTOR_PORT="+strconv.Itoa(port))
	h.Extra = []string{"FAKESMOLVM_GUEST_4788=" + strings.TrimPrefix(health.URL, "http://")}
	r := h.run("init")
	if r.code != 0 {
		t.Fatalf("init exited %d: %s", r.code, r.stderr)
	}
	// The Executor's discovery refresh is the 16th step.
	checkStepNumbers(t, "init with Executor", plainSteps(r.stderr), 16)
	var create string
	helperCopied := false
	for _, l := range boxtest.Lines(r.calls) {
		if strings.HasPrefix(l, "machine create --name hermes-box ") {
			create = l
		}
		helperCopied = helperCopied || l == "machine cp $ROOT/bin/hermes-box-agent-oci-linux-"+runtime.GOARCH+" hermes-builder:/usr/local/sbin/hermes-box-agent-oci"
	}
	if !helperCopied {
		t.Errorf("init did not copy the agent's Executor helper into the builder:\n%s", r.calls)
	}
	for _, want := range []string{fmt.Sprintf(" -p %d:22 -p %d:4788 ", h.Port, port), " -e HERMES_BOX_EXECUTOR_ENABLED=true ",
		" -e HERMES_BOX_EXECUTOR_HOST_PORT=" + strconv.Itoa(port) + " ", " -e HERMES_BOX_EXECUTOR_IMAGE=" + pins.DefaultExecutorImage + " "} {
		if !strings.Contains(create, want) {
			t.Errorf("runtime create %q lacks %q", create, want)
		}
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("Executor: http://localhost:%d (loopback only)", port)) {
		t.Errorf("handoff does not show Executor:\n%s", r.stdout)
	}
	r = h.run("executor", "status", "--json")
	var st executorStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("executor status: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if !st.Enabled || st.State != "running" || !st.Healthy || st.MetadataError != "" || st.Image != "" {
		t.Fatalf("executor status %+v (no release was pulled in this box)", st)
	}
	calls := string(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "root", ".testagent", "calls.log")))
	if !strings.Contains(calls, "relay: executor status") {
		t.Errorf("executor status did not reach the box's agent:\n%s", calls)
	}
	// Once healthy, the start asked the agent to restart the gateway so it
	// discovers Executor's tools, after health passed.
	if i, j := strings.Index(calls, "relay: health --json"), strings.Index(calls, "relay: executor refresh-discovery"); j < 0 || i > j {
		t.Errorf("init's start did not refresh Hermes' discovery after health:\n%s", calls)
	}
}
