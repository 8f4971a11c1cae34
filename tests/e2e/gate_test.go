package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// The gate's files the hermes user must not be able to write, and Hermes'
// venv, which Hermes imports at start (a .pth file in its site-packages
// would run inside every Hermes process).
var gateFiles = []string{
	boxlayout.HermesTree + "/plugins/hermes-box-gate/__init__.py",
	boxlayout.HermesTree + "/agent/auxiliary_client.py",
	boxlayout.HermesManagedDir + "/config.yaml",
	boxlayout.HermesVenv + "/lib/site-packages/hermes-box-e2e.pth",
}

// checkGate: provisioning installed the gate on the real Hermes 0.19.0 tree,
// and through hermes-box the box shows it active as Hermes resolves it;
// the agent's account cannot switch it off with `hermes config set` nor
// write any of its files, and the probe still reports the intended mode;
// one verdict of the reviewer (Hermes' own auxiliary client, only its
// OpenAI transport a stand-in answering as Codex) lands in the audit log,
// which the host reads and verifies.
func (b *box) checkGate() {
	t := b.t
	b.wantGate("after init")
	r := b.run(2*time.Minute, "ssh", "--", "sudo -n -u hermes env HERMES_HOME="+boxlayout.HermesHome+" hermes config set approvals.mode off")
	mustf(t, r.Code != 0 && strings.Contains(r.Stdout+r.Stderr, "Cannot set 'approvals.mode': it is managed by your administrator"),
		"hermes config set approvals.mode off as hermes: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	for _, f := range gateFiles {
		r := b.run(2*time.Minute, "ssh", "--", "sudo -n -u hermes sh -c 'echo import os >> "+f+"'")
		mustf(t, r.Code != 0 && strings.Contains(r.Stderr, "Permission denied"), "the hermes user wrote to %s: exit %d %s", f, r.Code, r.Stderr)
	}
	b.wantGate("after the tamper attempts")
	b.reviewOne()
	r = b.must(2*time.Minute, "audit", "--verify", "--json")
	mustf(t, strings.Contains(r.Stdout, `"ok":true`) && strings.Contains(r.Stdout, `"entries":1`), "hermes-box audit --verify: %s", r.Stdout)
	r = b.must(2*time.Minute, "audit")
	mustf(t, strings.Contains(r.Stdout, "approve") && strings.Contains(r.Stdout, "rm -r ./build"), "hermes-box audit:\n%s", r.Stdout)
}

// wantGate: status --json has the gate check healthy with Hermes 0.19.0's
// smart-plugin mechanism and the effective mode smart.
func (b *box) wantGate(when string) {
	r := b.must(2*time.Minute, "status", "--json")
	rep, err := health.Decode([]byte(r.Stdout))
	mustf(b.t, err == nil, "status --json: %v", err)
	c, g := rep.Checks[health.CheckGate], rep.Gate
	mustf(b.t, c.Status == health.StatusHealthy && g != nil && g.HermesVersion == "0.19.0" && g.Mechanism == "smart-plugin" &&
		g.EffectiveMode == "smart" && g.IntendedMode == "smart", "gate %s: %+v %+v", when, c, g)
	b.t.Logf("gate %s: %s", when, c.Message)
}

// reviewOne has the installed plugin review a destructive command as the
// hermes user, through Hermes' own call_llm(task="approval") and Codex
// adapter (the gate package's codex_request.py, run in the box).
func (b *box) reviewOne() {
	script, err := os.ReadFile(filepath.Join(b.e.Root, "guest-agent", "internal", "gate", "testdata", "codex_request.py"))
	if err != nil {
		b.t.Fatal(err)
	}
	r := b.runWith(nil, script, 2*time.Minute, "ssh", "--",
		"sudo -n -u hermes sh -c 'cd "+boxlayout.HermesTree+" && HERMES_HOME="+boxlayout.HermesHome+" PYTHONDONTWRITEBYTECODE=1 venv/bin/python -'")
	var out struct {
		Decision string `json:"decision"`
		Calls    int    `json:"calls"`
		Request  struct {
			Model       string `json:"model"`
			ServiceTier string `json:"service_tier"`
		} `json:"request"`
	}
	mustf(b.t, r.Code == 0 && json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &out) == nil, "the reviewer in the box: exit %d\n%s\n%s", r.Code, r.Stdout, tailText(r.Stderr, 4000))
	mustf(b.t, out.Decision == "approve" && out.Calls == 1 && out.Request.Model == "gpt-5.5" && out.Request.ServiceTier == "priority", "the reviewer's request: %+v", out)
}
