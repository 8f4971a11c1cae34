package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/health"
)

// initBox runs a successful init and checks its whole conversation.
func initBox(t testing.TB, h *harness) result {
	t.Helper()
	_, err := os.Stat(filepath.Join(h.Root, "state", "smolvm-binaries.json"))
	want := h.InitCalls()
	if err == nil { // the binary was checked by an earlier run
		want = slices.DeleteFunc(want, func(l string) bool { return strings.HasSuffix(l, " --help") })
	}
	r := h.run("init")
	if r.code != 0 {
		t.Fatalf("init exited %d\nstdout:\n%s\nstderr:\n%s\nsshd:\n%s", r.code, r.stdout, r.stderr, h.SSHD.Log)
	}
	boxtest.ExpectCalls(t, r.calls, want)
	checkStepNumbers(t, "init", plainSteps(r.stderr), 0)
	return r
}

func TestInit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := initBox(t, h)

	// The extraction-cache cap is raised on the runtime create only.
	for _, c := range r.calls {
		isRuntimeCreate := strings.HasPrefix(c.Line, "machine create --name hermes-box ")
		if got := c.Env["SMOLVM_PACK_CACHE_MAX_BYTES"]; (got == "17179869184") != isRuntimeCreate || (got != "" && !isRuntimeCreate) {
			t.Errorf("%q ran with SMOLVM_PACK_CACHE_MAX_BYTES=%q", c.Line, got)
		}
	}
	if got := h.Machines(); len(got) != 1 || got[boxtest.Machine] != "running" {
		t.Errorf("machines after init: %v; want only %s running (builder deleted)", got, boxtest.Machine)
	}
	pinned, err := keys.LoadHostKey(filepath.Join(h.Root, "state"), boxtest.Machine)
	if err != nil || string(pinned.Marshal()) != string(h.SSHD.HostKey.Marshal()) {
		t.Errorf("pinned host key %v (%v) is not the box's", pinned, err)
	}
	for _, want := range []string{"hermes auth add openai-codex", "hermes model", "codex login", "snapshot"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("handoff does not mention %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"[provision] started", "[packages] done", "[hermes] done", "[health] done"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(h.Root, "images", "hermes-base.smolmachine")); err != nil {
		t.Errorf("base image not published: %v", err)
	}
	calls := boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "root", ".testagent", "calls.log"))
	// provision is not a relay verb: it runs directly through smolvm exec.
	if !strings.Contains("\n"+string(calls), "\nprovision --authorized-keys /tmp/hermes-box-authorized-keys --hermes-commit ") ||
		strings.Contains(string(calls), "relay: provision") {
		t.Errorf("provision did not run directly with its arguments:\n%s", calls)
	}
}

func TestInitJSONProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.run("--log-format", "json", "init")
	if r.code != 0 {
		t.Fatalf("init exited %d: %s", r.code, r.stderr)
	}
	steps := 0
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var ev struct{ Type, Step, State string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		if ev.Type == "step" && ev.Step == "packages" && ev.State == "done" {
			steps++
		}
	}
	if steps != 1 {
		t.Errorf("the agent's step events were not passed on as JSON (%d)", steps)
	}
}

// TestInitRefusesSmolvmNames: a machine or builder name smolvm's own rule
// refuses (src/data/mod.rs) is refused when the configuration is loaded,
// naming the file, line and setting, before any smolvm call at all; the
// fake refuses the same names as smolvm does.
func TestInitRefusesSmolvmNames(t *testing.T) {
	t.Parallel()
	for _, conf := range []string{"HERMES_BOX_MACHINE_NAME=box.v2", "HERMES_BOX_MACHINE_NAME=box--2",
		"HERMES_BOX_MACHINE_NAME=box-", "HERMES_BOX_BUILDER_NAME=builder.tmp"} {
		t.Run(conf, func(t *testing.T) {
			h := newHarness(t, conf)
			key, _, _ := strings.Cut(conf, "=")
			r := h.run("init")
			if r.code == 0 || !strings.Contains(r.stderr, "hermes-box.conf:2: "+key+" ") {
				t.Fatalf("init with %s: exit %d\n%s", conf, r.code, r.stderr)
			}
			boxtest.ExpectCalls(t, r.calls, nil)
			_, value, _ := strings.Cut(conf, "=")
			cmd := exec.Command(bins.Smolvm, "machine", "create", "--name", value, "--image", "ubuntu:24.04")
			cmd.Env = h.Env
			if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Error: ") {
				t.Errorf("the fake smolvm created a machine named %q: %v %s", value, err, out)
			}
		})
	}
}

// TestLifecycle runs stop, status, start, restart, logs, ssh and destroy on
// an initialised box.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	status := []string{"machine status --name hermes-box --json"}

	r := h.run("stop")
	if r.code != 0 {
		t.Fatalf("stop: %d %s", r.code, r.stderr)
	}
	boxtest.ExpectCalls(t, r.calls, append(status, "machine stop --name hermes-box"))
	calls := string(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "root", ".testagent", "calls.log")))
	if !strings.Contains(calls, "relay: services stop all") {
		t.Errorf("stop did not ask the agent to stop the services:\n%s", calls)
	}

	st := statusJSON(t, h)
	if st.state != "stopped" || st.report.Status != health.StatusUnhealthy {
		t.Errorf("stopped box: state %q status %q", st.state, st.report.Status)
	}

	r = h.run("start")
	if r.code != 0 {
		t.Fatalf("start: %d %s", r.code, r.stderr)
	}
	boxtest.ExpectCalls(t, r.calls, append(append(status, "--version"), boxtest.Started(boxtest.Machine)...))

	r = h.run("restart")
	if r.code != 0 {
		t.Fatalf("restart: %d %s", r.code, r.stderr)
	}
	// The release is checked before the box stops (a release start would
	// refuse is refused with the box running).
	boxtest.ExpectCalls(t, r.calls, append(append(status, "--version", "machine stop --name hermes-box"), append(status, boxtest.Started(boxtest.Machine)...)...))

	st = statusJSON(t, h)
	if st.state != "running" || st.report.Status != health.StatusHealthy || st.report.Agent.Version == "" {
		t.Errorf("running box: state %q report %+v", st.state, st.report)
	}
	if c := st.report.Checks["loopback-listener"]; c.Status != health.StatusHealthy {
		t.Errorf("listener check: %+v", c)
	}
	// The services are the real agent's boot supervising the stand-ins.
	running := map[string]bool{}
	for _, s := range st.report.Services {
		running[s.Name] = s.State == health.ServiceRunning
	}
	if !running["sshd"] || !running["hermes"] {
		t.Errorf("services of the running box: %+v", st.report.Services)
	}
	// status checks the release too (smolvm upgraded under the box).
	boxtest.ExpectCalls(t, st.calls, append(status, "--version"))

	r = h.run("logs", "-n", "3")
	if r.code != 0 || r.stdout != "hermes line 1\nhermes line 2\nhermes line 3\n" {
		t.Errorf("logs: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r = h.run("logs", "missing"); r.code != 2 || !strings.Contains(r.stderr, `unknown service "missing": the box's services are sshd, hermes`) {
		t.Errorf("logs of a missing service exited %d, want 2 and the list of services: %s", r.code, r.stderr)
	}

	// Like ssh, the words of COMMAND reach the remote shell joined by spaces.
	r = h.run("ssh", "echo", "remote;", "exit", "7")
	if r.code != 7 || !strings.Contains(r.stdout, "remote") {
		t.Errorf("ssh CMD exited %d (want 7) %q %s", r.code, r.stdout, r.stderr)
	}

	if r = h.run("destroy"); r.code != 2 || !strings.Contains(r.stderr, "destroy needs --yes (or --force) off a terminal") {
		t.Errorf("destroy without --force: %d %s", r.code, r.stderr)
	}
	r = h.run("destroy", "--force")
	if r.code != 0 {
		t.Fatalf("destroy: %d %s", r.code, r.stderr)
	}
	boxtest.ExpectCalls(t, r.calls, []string{"machine ls --json", "machine status --name hermes-box --json",
		"machine stop --name hermes-box", "machine delete --name hermes-box --force", "machine ls --json"})
	if len(h.Machines()) != 0 {
		t.Errorf("machines left: %v", h.Machines())
	}
	if _, err := keys.LoadHostKey(filepath.Join(h.Root, "state"), boxtest.Machine); err == nil {
		t.Errorf("the pinned host key was kept")
	}
	if _, err := os.Stat(filepath.Join(h.Root, "state", "hermes-box-ed25519")); err != nil {
		t.Errorf("destroy removed the project key: %v", err)
	}
}

type statusResult struct {
	report *health.Report
	state  string
	calls  []boxtest.Call
}

// statusJSON runs status --json and decodes it with shared/health.
func statusJSON(t *testing.T, h *harness) statusResult {
	t.Helper()
	r := h.run("status", "--json")
	if r.code != 0 && r.code != 1 && r.code != 3 {
		t.Fatalf("status: %d %s", r.code, r.stderr)
	}
	report, err := health.Decode([]byte(r.stdout))
	if err != nil {
		t.Fatalf("status --json does not decode with shared/health: %v\n%s", err, r.stdout)
	}
	var extra struct {
		Machine struct{ State string } `json:"machine"`
	}
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &extra))
	return statusResult{report: report, state: extra.Machine.State, calls: r.calls}
}

// TestStartRefusesWideListener publishes the SSH port beyond loopback (as
// SMOLVM_PUBLISH_ADDR=0.0.0.0 makes smolvm 1.0.4 do): start must fail and
// stop the box; on loopback the same start passes.
func TestStartRefusesWideListener(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	if r := h.run("stop"); r.code != 0 {
		t.Fatalf("stop: %s", r.stderr)
	}
	h.Extra = []string{"SMOLVM_PUBLISH_ADDR=0.0.0.0"}
	r := h.run("start")
	if r.code != 1 || !strings.Contains(r.stderr, "not loopback-only") || !strings.Contains(r.stderr, "the machine was stopped") {
		t.Fatalf("start with a wide listener exited %d:\n%s", r.code, r.stderr)
	}
	boxtest.ExpectCalls(t, r.calls, []string{"machine status --name hermes-box --json",
		"--version", "machine start --name hermes-box", "machine status --name hermes-box --json", "machine stop --name hermes-box"})
	if got := h.Machines()[boxtest.Machine]; got != "stopped" {
		t.Errorf("box is %s after a refused start", got)
	}
	h.Extra = nil
	if r := h.run("start"); r.code != 0 {
		t.Fatalf("start on loopback: %d %s", r.code, r.stderr)
	}
}

// TestOperationLock holds the lock: mutating commands refuse and leave stale
// artifacts alone; once it is free, the next command reaps them.
func TestHelpAndCompletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.run("--help")
	for _, c := range []string{"init", "start", "stop", "restart", "status", "ssh", "shell", "logs", "destroy", "version", "completion", "snapshot", "restore", "package", "audit"} {
		if !strings.Contains(r.stdout, "\n  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, r.stdout)
		}
	}
	r = h.run("completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_hermes-box") {
		t.Errorf("completion bash: %d %s", r.code, r.stderr)
	}
}

// TestInitSecretsAndDocuments maps a secret by name only and copies the
// user's documents into the box.
func TestInitSecretsAndDocuments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_SECRET\n")
	h.Write("docs/SOUL.md", "be kind\n")
	const secret = "sk-very-secret-value"

	r := h.run("init")
	if r.code != 1 || !strings.Contains(r.stderr, `host environment variable "HBX_TEST_SECRET" referenced by secret mapping for "OPENAI_API_KEY" is unset or empty`) {
		t.Fatalf("init with an unset secret: %d %s", r.code, r.stderr)
	}
	if slices.ContainsFunc(boxtest.Lines(r.calls), func(l string) bool { return strings.HasPrefix(l, "machine create --name") }) {
		t.Fatalf("a machine was created despite the failed preflight")
	}

	h.Extra = []string{"HBX_TEST_SECRET=" + secret}
	r = h.run("init", "--document", filepath.Join(h.Root, "docs", "SOUL.md"))
	if r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.stderr)
	}
	log := string(boxtest.ReadFile(t, h.Log))
	if strings.Contains(log, secret) || strings.Contains(r.stderr, secret) || strings.Contains(r.stdout, secret) {
		t.Fatal("the secret's value reached argv, the log or the output")
	}
	var create string
	for _, l := range boxtest.Lines(r.calls) {
		if strings.HasPrefix(l, "machine create --name hermes-box ") {
			create = l
		}
	}
	// smolvm drops --secret-env on create --from: the secret travels on
	// the relay's stdin to the agent, which keeps it on tmpfs for the
	// gateway, at init's first start and at every start after.
	if create == "" || strings.Contains(strings.Join(boxtest.Lines(r.calls), "\n"), "HBX_TEST_SECRET") {
		t.Errorf("a smolvm call names the secret: %s", create)
	}
	box := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	gateway := func() {
		t.Helper()
		sum := sha256.Sum256([]byte(secret))
		if got := boxtest.ReadFile(t, filepath.Join(box, "run", "hbx-test-gateway-secret")); string(got) != hex.EncodeToString(sum[:]) {
			t.Errorf("the gateway's OPENAI_API_KEY digest %s, want the secret's", got)
		}
		info, err := os.Stat(filepath.Join(box, "run", "hermes-box-secrets", "root", "env.json"))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("root-only secrets file: %v %v", info, err)
		}
	}

	if !slices.Contains(boxtest.Lines(r.calls), "machine cp $ROOT/docs/SOUL.md hermes-box:/workspace/work/SOUL.md") {
		t.Errorf("the document was not copied:\n  %s", strings.Join(boxtest.Lines(r.calls), "\n  "))
	}
	got := boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "root", "workspace", "work", "SOUL.md"))
	if string(got) != "be kind\n" {
		t.Errorf("document in the box: %q", got)
	}
	gateway()
	if r := h.run("stop"); r.code != 0 {
		t.Fatalf("stop: %s", r.stderr)
	}
	boxtest.Must(t, os.RemoveAll(filepath.Join(box, "run", "hermes-box-secrets")))
	boxtest.Must(t, os.Remove(filepath.Join(box, "run", "hbx-test-gateway-secret")))
	h.Extra = nil
	rs := h.run("start")
	if rs.code != 1 || !strings.Contains(rs.stderr, `"HBX_TEST_SECRET" referenced by secret mapping for "OPENAI_API_KEY" is unset or empty`) ||
		slices.Contains(boxtest.Lines(rs.calls), "machine start --name hermes-box") {
		t.Fatalf("start without the host variable: %d %s %v", rs.code, rs.stderr, boxtest.Lines(rs.calls))
	}
	h.Extra = []string{"HBX_TEST_SECRET=" + secret}
	if rs = h.run("start"); rs.code != 0 {
		t.Fatalf("start: %s", rs.stderr)
	}
	gateway()
	if strings.Contains(string(boxtest.ReadFile(t, h.Log)), secret) || strings.Contains(rs.stderr+rs.stdout, secret) {
		t.Fatal("the secret's value reached argv, the log or the output")
	}
	r = h.run("status", "--long")
	if r.code != 0 || !strings.Contains(r.stdout, "loopback-listener") || !strings.Contains(r.stdout, "healthy") {
		t.Errorf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
