package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// recoveryBound is how long init, start, stop and restart may take to end
// after SIGINT when a step and its cleanup both hang: the test timing's
// interrupt grace (2 s) and process overhead, well under the fast cleanup
// timeout (15 s) that bounded a cleanup step before. A bound on
// behaviour, not a speed claim; the figure is logged.
const recoveryBound = 8 * time.Second

// hangSmolvm makes the fake smolvm calls the rules name hang (its
// <state>/hang file); the file beside it, hang.reached, lists the
// commands that did.
func (h *harness) hangSmolvm(rules ...string) string {
	h.T.Helper()
	boxtest.Must(h.T, os.MkdirAll(h.State, 0o755))
	boxtest.Must(h.T, os.WriteFile(filepath.Join(h.State, "hang"), []byte(strings.Join(rules, "\n")+"\n"), 0o644))
	return filepath.Join(h.State, "hang.reached")
}

// unhang ends every hang the harness set up (smolvm's and the agent's).
func (h *harness) unhang() {
	h.T.Helper()
	for _, p := range []string{filepath.Join(h.State, "hang"), filepath.Join(h.State, "hang.reached"), filepath.Join(h.State, "hostile")} {
		boxtest.Must(h.T, os.RemoveAll(p))
	}
}

// expectInterrupted wants the run to have ended within recoveryBound with
// status 130 and to say what it left (left) and what to run next (next).
func expectInterrupted(t *testing.T, what string, r result, left, next string) {
	t.Helper()
	expectEndedWithin(t, what, r, recoveryBound)
	if !strings.Contains(r.stderr, "interrupted: "+left) || !strings.Contains(r.stderr, "next: "+next) {
		t.Errorf("%s: does not say it left %q and to run %q:\n%s", what, left, next, r.stderr)
	}
}

// TestHostileCtrlCInit: SIGINT at each step of init where a real one can
// wait long (the builder provisioning, pack, the box's create, its first
// start, the readiness wait) ends init within seconds even when the
// cleanup smolvm call hangs too, says what it left and what to run next,
// and that next command recovers.
func TestHostileCtrlCInit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hang  []string // the fake's hang rules; the first is the step's
		agent string   // or a verb the agent hangs in
		left  string
		next  string
	}{
		// The builder's third exec is provision; its delete hangs too.
		{name: "builder provisioning", hang: []string{"machine exec@hermes-builder#3", "machine delete@hermes-builder"},
			left: "there is no box hermes-box; the builder hermes-builder is left", next: "hermes-box init"},
		{name: "pack", hang: []string{"pack create"}, left: "there is no box hermes-box", next: "hermes-box init"},
		{name: "machine create", hang: []string{"machine create@hermes-box"}, left: "there is no box hermes-box", next: "hermes-box init"},
		{name: "first start", hang: []string{"machine start@hermes-box"}, left: "hermes-box exists and is", next: "hermes-box start"},
		{name: "readiness", agent: "health", hang: []string{"machine stop@hermes-box"},
			left: "hermes-box is running but was not verified", next: "hermes-box restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			reached := h.hangSmolvm(tc.hang...)
			if tc.agent != "" {
				reached = h.Hostile(tc.agent, "hang") + ".reached"
			}
			r := h.runInterrupted(reached, "init")
			h.unhang()
			expectInterrupted(t, "init interrupted in "+tc.name, r, tc.left, tc.next)
			switch tc.next {
			case "hermes-box init":
				r = mustRun(t, h, "init")
				if strings.Contains(tc.left, "builder") && !strings.Contains(r.stderr, "left by an interrupted init") {
					t.Errorf("init does not say it deletes the builder left behind:\n%s", r.stderr)
				}
			default:
				mustRun(t, h, strings.TrimPrefix(tc.next, "hermes-box "))
			}
			expectHealthy(t, h, "after "+tc.next)
		})
	}
}

// TestHostileCtrlCStart: SIGINT at each step of start (the machine start,
// the readiness wait, the secrets' delivery, the network proof), of stop
// (the services' stop) and of restart ends the command within seconds,
// says what it left and what to run next, and that next command recovers.
func TestHostileCtrlCStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cmd string
		hang      []string // the fake's hang rules
		agent     string   // a verb the agent hangs in (VERB or VERB.SUB)
		netmode   bool     // network mode none, proven at every start
		left      string
		next      string
	}{
		{name: "machine start", cmd: "start", hang: []string{"machine start@hermes-box"}, left: "hermes-box exists and is stopped", next: "hermes-box start"},
		{name: "readiness", cmd: "start", agent: "health", hang: []string{"machine stop@hermes-box"},
			left: "hermes-box is running but was not verified", next: "hermes-box restart"},
		{name: "secrets delivery", cmd: "start", agent: "secrets.set", left: "hermes-box exists and is stopped", next: "hermes-box start"},
		{name: "network proof", cmd: "start", agent: "netprobe", netmode: true, hang: []string{"machine stop@hermes-box"},
			left: "hermes-box is running but was not verified", next: "hermes-box restart"},
		{name: "stop services", cmd: "stop", agent: "services.stop", left: "hermes-box is still running", next: "hermes-box stop"},
		{name: "restart readiness", cmd: "restart", agent: "health", left: "hermes-box exists and is stopped", next: "hermes-box start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conf []string
			if tc.netmode {
				conf = append(conf, "HERMES_BOX_NETWORK_MODE=none")
			}
			h := newHarness(t, conf...)
			if tc.netmode {
				h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.9.3", "HBX_TEST_NETPROBE_PLAN="+probePlan(t, closingListener(t), "127.0.0.1:1"))
			}
			h.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_SECRET\n")
			h.Extra = []string{"HBX_TEST_SECRET=sk-interrupted"}
			mustRun(t, h, "init")
			if tc.cmd == "start" {
				mustRun(t, h, "stop")
			}
			reached := h.hangSmolvm(tc.hang...)
			if tc.agent != "" {
				reached = h.Hostile(tc.agent, "hang") + ".reached"
			}
			r := h.runInterrupted(reached, tc.cmd)
			h.unhang()
			expectInterrupted(t, tc.cmd+" interrupted in "+tc.name, r, tc.left, tc.next)
			mustRun(t, h, strings.TrimPrefix(tc.next, "hermes-box "))
			if tc.cmd == "stop" {
				if got := h.Machines()[boxtest.Machine]; got != "stopped" {
					t.Errorf("after the second stop the box is %s", got)
				}
				return
			}
			expectHealthy(t, h, "after "+tc.next)
		})
	}
}

// closingListener accepts and closes connections until the test ends: the
// one port a network proof plan allows.
func closingListener(t *testing.T) net.Listener {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	boxtest.Must(t, err)
	t.Cleanup(func() { open.Close() })
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return open
}

// probePlan writes a network proof plan of loopback targets and returns its
// path: the direct-IP probe goes to directIP, every other probe to a port
// that refuses, and the allowed port is open's.
func probePlan(t *testing.T, open net.Listener, directIP string) string {
	_, port, _ := net.SplitHostPort(open.Addr().String())
	p := netproof.Plan{DirectIP: directIP, UnlistedHost: "unlisted.test:1", IPv6: "[::1]:1",
		HostLoopback: []string{"127.0.0.1:1"}, GatewayPorts: []int{1}, TimeoutMillis: 2000, AllowedPort: atoi(t, port),
		Resolve: map[string]string{"allowed.example.com": "127.0.0.1", "unlisted.test": "127.0.0.1"}}
	path := filepath.Join(t.TempDir(), "plan.json")
	b, _ := json.Marshal(p)
	boxtest.Must(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestHostileSecretsAfterCutOver: a restore proves the backup on a
// candidate that never gets the secrets (no `secrets set`, no secret byte
// on any stdin of its agent), and the restored box gets them only once the
// cut-over is complete (the restore journal is gone). The recording agent
// logs every relayed call of every machine with whether the journal
// existed at that moment, and keeps every stdin.
func TestHostileSecretsAfterCutOver(t *testing.T) {
	t.Parallel()
	const secret = "sk-restored-secret-value"
	h := newHarness(t)
	h.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_SECRET\n")
	h.Extra = []string{"HBX_TEST_SECRET=" + secret}
	mustRun(t, h, "init")
	backup := strings.TrimSpace(mustRun(t, h, "snapshot", "b").stdout)
	box := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	boxtest.Must(t, os.Remove(filepath.Join(box, "run", "hbx-test-gateway-secret")))
	rec := filepath.Join(h.State, "record")
	boxtest.Must(t, os.MkdirAll(rec, 0o755))
	boxtest.Must(t, os.WriteFile(filepath.Join(rec, "watch"), []byte(filepath.Join(h.Root, "state", "restore-journal")), 0o644))

	mustRun(t, h, "restore", backup)

	logs, _ := filepath.Glob(filepath.Join(rec, "*.log"))
	candidates := 0
	for _, l := range logs {
		name := strings.TrimSuffix(filepath.Base(l), ".log")
		calls := string(boxtest.ReadFile(t, l))
		stdin, _ := os.ReadFile(filepath.Join(rec, name+".stdin"))
		if name == boxtest.Machine {
			continue
		}
		candidates++
		if strings.Contains(calls, "secrets set") || strings.Contains(string(stdin), secret) {
			t.Errorf("candidate %s got the secrets:\n%s", name, calls)
		}
	}
	if candidates == 0 {
		t.Fatalf("no candidate's calls were recorded: %v", logs)
	}
	calls := strings.Split(strings.TrimSpace(string(boxtest.ReadFile(t, filepath.Join(rec, boxtest.Machine+".log")))), "\n")
	sets, inCutOver := 0, 0
	for _, c := range calls {
		if strings.HasSuffix(c, "watched=present") {
			inCutOver++
		}
		if strings.HasPrefix(c, "secrets set") {
			sets++
			if !strings.HasSuffix(c, "watched=absent") {
				t.Errorf("the restored box got its secrets during the cut-over: %q", c)
			}
		}
	}
	if sets != 1 || inCutOver == 0 {
		t.Errorf("%d secrets set calls, %d calls during the cut-over:\n%s", sets, inCutOver, strings.Join(calls, "\n"))
	}
	if stdin := boxtest.ReadFile(t, filepath.Join(rec, boxtest.Machine+".stdin")); !strings.Contains(string(stdin), secret) {
		t.Errorf("the restored box's agent never read the secret on its stdin")
	}
	sum := sha256.Sum256([]byte(secret))
	if got := boxtest.ReadFile(t, filepath.Join(box, "run", "hbx-test-gateway-secret")); string(got) != hex.EncodeToString(sum[:]) {
		t.Errorf("the restored gateway's OPENAI_API_KEY digest %s, want the secret's", got)
	}
	expectHealthy(t, h, "after the restore")
}
