package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/zalando/go-keyring"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/listener"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/mcp/mcptest"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The names these tests have always used for the executor's box (now
// host/internal/box's Executor), its status and its keyring entry.
type (
	executorBox        = box.Executor
	executorStatusView = box.ExecutorStatus
)

const keyUser = box.ExecutorKeyUser

var keyService = box.ExecutorKeyService

// fakeAgent records the verbs it is asked to run and answers from a table.
type fakeAgent struct {
	argvs  [][]string
	stdins []string
	out    map[string]string
}

// Run answers as the agent's relay does.
func (f *fakeAgent) Run(_ context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	f.argvs = append(f.argvs, req.Argv)
	if stdin != nil {
		b, _ := io.ReadAll(stdin)
		f.stdins = append(f.stdins, string(b))
	}
	_, err := io.WriteString(stdout, f.out[strings.Join(req.Argv, " ")])
	return 0, err
}

// door is the agent client over a test transport.
func door(tr interface {
	Run(context.Context, protocol.Request, io.Reader, io.Writer, func(protocol.Event)) (int, error)
}) *agent.Client {
	return agent.New(tr, nil)
}

// execAgent runs the real agent binary with --root in a temp dir, speaking
// the relay protocol on its stdin as the SSH relay does.
type execAgent struct {
	bin, root string
	argvs     [][]string
	// extra adds arguments to the verb it is keyed by ("executor connect-hermes").
	extra map[string][]string
}

// Run runs the agent's relay with the request, as sshd does.
func (a *execAgent) Run(ctx context.Context, r protocol.Request, stdin io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	a.argvs = append(a.argvs, r.Argv)
	argv := append(slices.Clone(r.Argv), a.extra[strings.Join(r.Argv, " ")]...)
	var req bytes.Buffer
	if err := protocol.WriteRequest(&req, protocol.Request{ProtocolVersion: protocol.Version, Argv: argv,
		Options: protocol.Options{Stdin: stdin != nil}}); err != nil {
		return -1, err
	}
	in := io.Reader(&req)
	if stdin != nil {
		in = io.MultiReader(&req, stdin)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, a.bin, "--root", a.root, "relay")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, stdout, &stderr
	if err := cmd.Run(); err != nil {
		return -1, fmt.Errorf("agent %v: %w: %s", argv, err, stderr.String())
	}
	return 0, nil
}

// buildAgent compiles the Executor helper (the agent with the executor verb
// in-process) for this machine.
func buildAgent(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "hermes-box-agent")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./guest-agent/cmd/hermes-box-agent-oci")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, b)
	}
	return bin
}

// portOf returns the port of an httptest server.
func portOf(t *testing.T, url string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// memKeyring is one test's OS keyring: go-keyring's mock is one map for
// the whole process, which tests running at once would share (and race on).
type memKeyring struct {
	mu sync.Mutex
	m  map[string]string
}

func newMemKeyring() *memKeyring { return &memKeyring{m: map[string]string{}} }

func (k *memKeyring) Get(service, user string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.m[service+"\x00"+user]; ok {
		return v, nil
	}
	return "", keyring.ErrNotFound
}

func (k *memKeyring) Set(service, user, secret string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[service+"\x00"+user] = secret
	return nil
}

func (k *memKeyring) Delete(service, user string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[service+"\x00"+user]; !ok {
		return keyring.ErrNotFound
	}
	delete(k.m, service+"\x00"+user)
	return nil
}

// runExecutor runs `hermes-box executor ARGS` with deps around box. A box
// without State runs; one without CheckListener has the real check.
func runExecutor(t *testing.T, box *executorBox, stdin string, args ...string) (int, string, string) {
	t.Helper()
	if box.Secrets == nil {
		t.Fatal("runExecutor: the box needs its test's keyring (newMemKeyring), not the process-wide mock")
	}
	if box.State == nil {
		box.State = func(context.Context) (string, error) { return "running", nil }
	}
	if box.CheckListener == nil {
		box.CheckListener = func(ctx context.Context) error { return listener.Checker{}.CheckLoopback(ctx, box.Port) }
	}
	deps := defaultExecutorDeps()
	deps.loadBox = func(*cobra.Command) (*executorBox, error) { return box, nil }
	deps.openURL = func(context.Context, string) error { return nil }
	root := newRootCommand()
	for _, c := range root.Commands() {
		if c.Name() == "executor" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newExecutorCommandWith(deps))
	var out, errb bytes.Buffer
	root.SetArgs(append([]string{"executor"}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.ExecuteContext(t.Context()); err != nil {
		fmt.Fprintf(&errb, "hermes-box: %v\n", err)
		code = 1
	}
	return code, out.String(), errb.String()
}

func TestExecutorAuthSetReadsStdinNeverArgv(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	box := &executorBox{Secrets: kr, Machine: "m1", Enabled: true, Port: 4788, Agent: door(&fakeAgent{})}
	if code, out, errs := runExecutor(t, box, "Bearer exk_from-stdin\n", "auth", "set"); code != 0 || strings.Contains(out+errs, "exk_from-stdin") {
		t.Fatalf("exit %d, out %q, err %q", code, out, errs)
	}
	if got, err := kr.Get("hermes-box.executor.m1", "api-key"); err != nil || got != "exk_from-stdin" {
		t.Fatalf("keyring holds %q (%v)", got, err)
	}
	code, out, errs := runExecutor(t, box, "", "auth", "set", "exk_in-argv")
	if code == 0 || strings.Contains(out+errs, "exk_in-argv") || !strings.Contains(errs, "never from the command line") {
		t.Fatalf("a key in argv: exit %d, out %q, err %q", code, out, errs)
	}
	if got, _ := kr.Get("hermes-box.executor.m1", "api-key"); got != "exk_from-stdin" {
		t.Fatalf("keyring changed to %q", got)
	}
	if code, _, errs := runExecutor(t, box, "  \n", "auth", "set"); code == 0 || !strings.Contains(errs, "empty") {
		t.Fatalf("empty key: exit %d %s", code, errs)
	}
	if _, out, _ := runExecutor(t, box, "", "auth", "status"); !strings.Contains(out, "stored in the OS keyring") {
		t.Fatalf("status %q", out)
	}
	if _, out, _ := runExecutor(t, box, "", "auth", "clear"); !strings.Contains(out, "removed") {
		t.Fatalf("clear %q", out)
	}
	if _, out, _ := runExecutor(t, box, "", "auth", "status"); !strings.Contains(out, "not stored") {
		t.Fatalf("status after clear %q", out)
	}
}

func TestExecutorMCPCommands(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			kr := newMemKeyring()
			srv := mcptest.New("exk_1", sse)
			defer srv.Close()
			box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: portOf(t, srv.URL), Agent: door(&fakeAgent{})}
			if err := kr.Set(keyService("m"), keyUser, "exk_1"); err != nil {
				t.Fatal(err)
			}
			if code, out, errs := runExecutor(t, box, "", "mcp-test"); code != 0 || !strings.Contains(out, "Executor MCP OK") {
				t.Fatalf("mcp-test: exit %d %q %s", code, out, errs)
			}
			if code, out, errs := runExecutor(t, box, "", "tools", `gi"thub`, "--limit", "5", "--namespace", "gh", "--json"); code != 0 || out != "{\"ok\":true}\n" {
				t.Fatalf("tools: exit %d %q %s", code, out, errs)
			}
			if code, _, errs := runExecutor(t, box, "", "connections"); code != 0 {
				t.Fatalf("connections: %s", errs)
			}
			want := []string{`return await tools.search({"limit":5,"namespace":"gh","query":"gi\"thub"});`,
				"return await tools.executor.coreTools.connections.list({});"}
			if got := srv.Codes(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("execute got %q, want %q", got, want)
			}
			srv.Tools = []string{"execute", "resume", "shell"}
			if code, _, errs := runExecutor(t, box, "", "mcp-test"); code == 0 || !strings.Contains(errs, "unexpected Executor MCP surface") {
				t.Fatalf("three tools accepted: %s", errs)
			}
		})
	}
}

func TestExecutorRefusals(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	off := &executorBox{Secrets: kr, Machine: "m", Enabled: false, Port: 4788, Agent: door(&fakeAgent{})}
	if code, _, errs := runExecutor(t, off, "", "tools"); code == 0 || !strings.Contains(errs, "not enabled") {
		t.Fatalf("disabled: %s", errs)
	}
	on := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: 4788, Agent: door(&fakeAgent{})}
	if code, _, errs := runExecutor(t, on, "", "mcp-test"); code == 0 || !strings.Contains(errs, "auth set") {
		t.Fatalf("no key: %s", errs)
	}
	if code, _, errs := runExecutor(t, on, "", "tools", "--limit", "0"); code == 0 || !strings.Contains(errs, "--limit") {
		t.Fatalf("limit 0: %s", errs)
	}
}

func TestExecutorStatus(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" {
			http.NotFound(w, r)
		}
	}))
	defer health.Close()
	agent := &fakeAgent{out: map[string]string{"executor status --sizes": `{"current":{"imageReference":"ghcr.io/x/y:v1@sha256:aa","manifestDigest":"sha256:bb"},"runtimeBytes":2048,"dataBytes":10}`}}
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: portOf(t, health.URL), Agent: door(agent)}
	code, out, errs := runExecutor(t, box, "", "status", "--json", "--sizes")
	if code != 0 {
		t.Fatal(errs)
	}
	var v executorStatusView
	if err := json.Unmarshal([]byte(out), &v); err != nil || !v.Healthy || v.ImageDigest != "sha256:bb" || *v.RuntimeBytes != 2048 || v.AuthStored {
		t.Fatalf("status %s (%v)", out, err)
	}
	_, out, _ = runExecutor(t, box, "", "status", "--sizes")
	if !strings.Contains(out, "Disk:       runtime 2.0 KiB, data 10 B") || !strings.Contains(out, "Health:     ok") {
		t.Fatalf("text status:\n%s", out)
	}
}

func TestExecutorConnectHermesAgainstTheAgent(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	srv := mcptest.New("exk_connect-1", true)
	defer srv.Close()
	root := t.TempDir()
	// Hermes with its approval gate, as provisioning leaves it.
	boxtest.Must(t, os.CopyFS(root, os.DirFS(boxtest.GatedHermes(t))))
	home := filepath.Join(root, "workspace/hermes-home")
	// The box's home and the gateway's working directory, as boot prepares them.
	for _, dir := range []string{home, filepath.Join(root, boxlayout.WorkDir)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model:\n  default: gpt-5 # keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hermesStandin(t, root)
	// The agent checks Executor at the address Hermes uses, in the box;
	// here that is the stand-in's.
	agent := &execAgent{bin: buildAgent(t), root: root, extra: map[string][]string{"executor connect-hermes": {"--mcp-url", srv.MCPURL()}}}
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: portOf(t, srv.URL), Agent: door(agent)}
	if code, _, errs := runExecutor(t, box, "exk_connect-1\n", "auth", "set"); code != 0 {
		t.Fatal(errs)
	}
	started := time.Now().Add(-time.Second)
	code, out, errs := runExecutor(t, box, "", "connect-hermes")
	if code != 0 || !strings.Contains(out, "connected to Executor") {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	// The agent asked Hermes for the gate's verdict on the files it
	// changed, so the next health check finds it kept.
	if fi, err := os.Stat(filepath.Join(root, boxlayout.GateVerdictCache)); err != nil || fi.ModTime().Before(started) {
		t.Fatalf("connect-hermes kept no gate verdict for the changed config (%v)\n%s", err, errs)
	}
	for _, argv := range agent.argvs {
		if strings.Contains(strings.Join(argv, " "), "exk_connect-1") {
			t.Fatalf("the key was in the agent's argv %q", argv)
		}
	}
	env, _ := os.ReadFile(filepath.Join(home, ".env"))
	if string(env) != "MCP_EXECUTOR_API_KEY=exk_connect-1\n" {
		t.Fatalf(".env = %q", env)
	}
	cfg, _ := os.ReadFile(filepath.Join(home, "config.yaml"))
	want := "model:\n  default: gpt-5 # keep me\nmcp_servers:\n  executor:\n    url: " + srv.MCPURL() + "\n    headers:\n      Authorization: Bearer ${MCP_EXECUTOR_API_KEY}\n    enabled: true\n"
	if string(cfg) != want {
		t.Fatalf("config.yaml:\n%s\nwant:\n%s", cfg, want)
	}
}

// TestExecutorConnectHermesKeyFromStdin: with --api-key-stdin the key
// comes from stdin (no keyring needed), normalised, and goes to the agent
// on its stdin only; the host does not touch Executor's port.
func TestExecutorConnectHermesKeyFromStdin(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	agent := &fakeAgent{}
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: 1, Agent: door(agent),
		CheckListener: func(context.Context) error { return errors.New("the host must not check Executor's port") }}
	code, out, errs := runExecutor(t, box, "Bearer exk_stdin-1\n", "connect-hermes", "--api-key-stdin")
	if code != 0 || !strings.Contains(out, "connected to Executor") {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	if len(agent.argvs) != 1 || strings.Join(agent.argvs[0], " ") != "executor connect-hermes" || agent.stdins[0] != "exk_stdin-1\n" {
		t.Fatalf("agent got %q with stdin %q", agent.argvs, agent.stdins)
	}
	if code, _, errs := runExecutor(t, box, "\n", "connect-hermes", "--api-key-stdin"); code == 0 || len(agent.argvs) != 1 {
		t.Fatalf("an empty key: exit %d, %d agent calls: %s", code, len(agent.argvs), errs)
	}
	if code, _, errs := runExecutor(t, box, "", "connect-hermes"); code == 0 || !strings.Contains(errs, "auth set") {
		t.Fatalf("no stored key: exit %d: %s", code, errs)
	}
}

// hermesStandin gives the box under root a hermes account (this test's
// user) and the agent's stand-in `hermes`, whose `mcp test` probes the
// configured server as Hermes does.
func hermesStandin(t *testing.T, root string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "..", "..", "guest-agent", "internal", "executor", "hermeslink", "testdata", "hermes-standin.py"))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	for name, body := range map[string]string{
		"etc/passwd":           fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/sh\n", uid, gid),
		"etc/group":            fmt.Sprintf("root:x:0:\nhermes:x:%d:\n", gid),
		"usr/local/bin/hermes": string(script),
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExecutorChecksTheListenerFirst: with Executor's port bound beyond
// loopback, no command talks to it. (connect-hermes never talks to it: the
// agent checks Executor inside the box.)
func TestExecutorChecksTheListenerFirst(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	if err := kr.Set(keyService("m"), keyUser, "exk_1"); err != nil {
		t.Fatal(err)
	}
	wide := fmt.Errorf("refusing to use Executor's port: port %d is %w: listening on 0.0.0.0:%d", portOf(t, srv.URL), listener.ErrNotLoopback, portOf(t, srv.URL))
	agent := &fakeAgent{}
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: portOf(t, srv.URL), Agent: door(agent),
		CheckListener: func(context.Context) error { return wide }}
	for _, args := range [][]string{{"open"}, {"mcp-test"}, {"tools", "x"}, {"connections"}} {
		if code, _, errs := runExecutor(t, box, "", args...); code == 0 || !strings.Contains(errs, "not loopback-only") {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
	code, out, errs := runExecutor(t, box, "", "status", "--json")
	var v executorStatusView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Healthy || !strings.Contains(v.HealthError, "not loopback-only") {
		t.Errorf("status: exit %d %s %s", code, out, errs)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached a port that is not loopback-only", n)
	}
	if len(agent.argvs) != 1 || agent.argvs[0][0] != "executor" {
		t.Fatalf("agent calls %v, want only status's metadata", agent.argvs)
	}
}

func TestExecutorLogsIsTheGenericLogsVerb(t *testing.T) {
	t.Parallel()
	agent := &fakeAgent{out: map[string]string{"logs executor -n 100": "a\n", "logs executor -n 5 -f": "b\n"}}
	box := &executorBox{Secrets: newMemKeyring(), Machine: "m", Enabled: true, Port: 4788, Agent: door(agent)}
	if code, out, errs := runExecutor(t, box, "", "logs"); code != 0 || out != "a\n" {
		t.Fatalf("logs: exit %d %q %s", code, out, errs)
	}
	if code, out, errs := runExecutor(t, box, "", "logs", "-f", "-n", "5"); code != 0 || out != "b\n" {
		t.Fatalf("logs -f: exit %d %q %s", code, out, errs)
	}
	if code, _, errs := runExecutor(t, box, "", "logs", "-n", "-1"); code == 0 || !strings.Contains(errs, "negative") || len(agent.argvs) != 2 {
		t.Fatalf("logs -n -1: exit %d %s", code, errs)
	}
}

// TestExecutorKeyOnlyToARunningBox: while the box is stopped, the MCP
// commands refuse before the port is checked or spoken to: whatever holds
// it then is not the box's Executor, and must not get the API key.
func TestExecutorKeyOnlyToARunningBox(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Add(1) }))
	defer srv.Close()
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: portOf(t, srv.URL), Agent: door(&fakeAgent{}),
		State:         func(context.Context) (string, error) { return "stopped", nil },
		CheckListener: func(context.Context) error { t.Error("listener checked on a stopped box"); return nil }}
	if err := box.StoreKey("sk-stopped"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mcp-test"}, {"connections"}, {"tools"}} {
		code, _, errs := runExecutor(t, box, "", args...)
		if code == 0 || !strings.Contains(errs, "is stopped: refusing to send the Executor API key") || asked.Load() != 0 {
			t.Errorf("%v: exit %d, %d requests: %s", args, code, asked.Load(), errs)
		}
	}
}

func TestExecutorStatusOfAStoppedBox(t *testing.T) {
	t.Parallel()
	kr := newMemKeyring()
	agent := &fakeAgent{}
	box := &executorBox{Secrets: kr, Machine: "m", Enabled: true, Port: 4788, Agent: door(agent),
		State:         func(context.Context) (string, error) { return "stopped", nil },
		CheckListener: func(context.Context) error { t.Error("listener checked on a stopped box"); return nil }}
	code, out, errs := runExecutor(t, box, "", "status", "--json")
	var v executorStatusView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.State != "stopped" || v.Healthy || v.HealthError != "" || len(agent.argvs) != 0 {
		t.Fatalf("status: exit %d %s %s (agent %v)", code, out, errs, agent.argvs)
	}
	if _, out, _ := runExecutor(t, box, "", "status"); !strings.Contains(out, "Machine:    m (stopped)") || strings.Contains(out, "Health:") {
		t.Fatalf("text status:\n%s", out)
	}
}
