package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/health"
)

// checkConnectHermes runs `hermes-box executor connect-hermes` against the
// box, with a stand-in Executor listening in the guest at the address
// Hermes uses (127.0.0.1:4788) and the installer's stand-in `hermes`,
// whose `mcp test` probes the configured server as Hermes does. First the
// success path: the agent checks the MCP surface inside the box, writes
// Hermes' .env and config.yaml, `hermes mcp test executor` runs as the
// hermes user, and the gateway is restarted. Then, with the stand-in
// refusing Hermes' client, a second connect-hermes fails and leaves both
// files as they were, and the gateway is not restarted.
func (b *box) checkConnectHermes() {
	t := b.t
	script, err := os.ReadFile(filepath.Join(b.e.Root, "tests/e2e/testdata/executor-standin.py"))
	if err != nil {
		t.Fatal(err)
	}
	b.mustWith(nil, script, 2*time.Minute, "ssh", "--", "cat > /tmp/executor-standin.py")
	b.ssh("setsid nohup python3 /tmp/executor-standin.py >/tmp/executor-standin.log 2>&1 </dev/null & echo $! >/tmp/executor-standin.pid")
	defer b.ssh("kill $(cat /tmp/executor-standin.pid); rm -f /tmp/executor-standin.refuse-python")
	eventually(t, time.Minute, time.Second, "the stand-in Executor answering in the guest", func() error {
		r := b.run(time.Minute, "ssh", "--", `python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:4788/api/health", timeout=2)'`)
		if r.Code != 0 {
			return fmt.Errorf("exit %d: %s", r.Code, tailText(r.Stderr, 500))
		}
		return nil
	})
	enabled := []string{"HERMES_BOX_EXECUTOR_ENABLED=true"}
	gateway := b.gatewayPID()

	var r Result
	b.withExecutorRecord(func() {
		r = b.mustWith(enabled, []byte("exk_e2e-first\n"), 5*time.Minute, "executor", "connect-hermes", "--api-key-stdin")
	})
	mustf(t, strings.Contains(r.Stdout, "connected to Executor"), "connect-hermes said:\n%s", r.Stdout)
	cfg := b.ssh("sudo -n -u hermes cat /workspace/hermes-home/config.yaml")
	mustf(t, strings.Contains(cfg, "  executor:\n    url: http://127.0.0.1:4788/mcp\n") && strings.Contains(cfg, "Bearer ${MCP_EXECUTOR_API_KEY}"), "config.yaml:\n%s", cfg)
	mustf(t, b.ssh("sudo -n -u hermes grep -c '^MCP_EXECUTOR_API_KEY=exk_e2e-first$' /workspace/hermes-home/.env") == "1", ".env does not hold the key")
	ran := b.ssh("sudo -n -u hermes cat /workspace/hermes-home/mcp-test-standin.json")
	uid := b.ssh("id -u hermes")
	mustf(t, strings.Contains(ran, `"uid": `+uid+",") && strings.Contains(ran, `"home": "/home/hermes"`), "hermes mcp test ran as %s, want uid %s", ran, uid)
	restarted := b.gatewayPID()
	mustf(t, restarted != gateway, "the gateway was not restarted (pid %d before and after)", gateway)

	files := "sudo -n -u hermes sha256sum /workspace/hermes-home/config.yaml /workspace/hermes-home/.env"
	before := b.ssh(files)
	b.ssh("touch /tmp/executor-standin.refuse-python")
	b.withExecutorRecord(func() {
		r = b.runWith(enabled, []byte("exk_e2e-second\n"), 5*time.Minute, "executor", "connect-hermes", "--api-key-stdin")
	})
	mustf(t, r.Code != 0 && strings.Contains(r.Stderr, "hermes mcp test executor") && strings.Contains(r.Stderr, "Hermes' configuration is as it was"),
		"a failing mcp test: exit %d\n%s", r.Code, tailText(r.Stderr, 3000))
	mustf(t, !strings.Contains(r.Stdout+r.Stderr, "exk_e2e-second"), "the key was printed")
	mustf(t, b.ssh(files) == before, "Hermes' files changed after a failed connect:\n%s\nbefore:\n%s", b.ssh(files), before)
	mustf(t, b.gatewayPID() == restarted, "the gateway was restarted after a failed connect")
}

// withExecutorRecord runs fn while the host's record of what the box was
// created with says it has the Executor. The e2e box is made without it
// (the image pull needs the network), and connect-hermes refuses a box
// whose record says it has none; the stand-in Executor in the guest takes
// the image's place. The record is put back afterwards, so status and the
// other phases see the box as it was made.
func (b *box) withExecutorRecord(fn func()) {
	t := b.t
	t.Helper()
	path := filepath.Join(b.Project, filenames.StateDir, filenames.BoxSettings)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the box's settings record: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(orig, &rec); err != nil {
		t.Fatalf("the box's settings record %s: %v", path, err)
	}
	mustf(t, rec["executorEnabled"] == false, "the e2e box was created with the Executor: %s", orig)
	rec["executorEnabled"] = true
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data, 0o600)
	defer writeFile(t, path, orig, 0o600)
	fn()
}

// mustWith is runWith that fails the test unless hermes-box exits 0.
func (b *box) mustWith(env []string, stdin []byte, timeout time.Duration, args ...string) Result {
	b.t.Helper()
	r := b.runWith(env, stdin, timeout, args...)
	if r.Code != 0 {
		b.t.Fatalf("hermes-box %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, tailText(r.Stderr, 6000))
	}
	return r
}

// gatewayPID is the Hermes gateway's pid from status --json.
func (b *box) gatewayPID() int {
	b.t.Helper()
	rep, err := health.Decode([]byte(b.must(2*time.Minute, "status", "--json").Stdout))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, s := range rep.Services {
		if s.Name == "hermes" && s.State == health.ServiceRunning {
			return s.PID
		}
	}
	b.t.Fatalf("no running gateway: %+v", rep.Services)
	return 0
}
