package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// TestJudgeGateAttack: the e2e gate-attack step passes when the gate held
// with the health green, or when status is unhealthy naming the gate, and
// fails on an attack that worked while the health stayed green, and on a
// report that is neither.
func TestJudgeGateAttack(t *testing.T) {
	const want = "smart"
	gate := func(status health.Status, effective, message string) health.Report {
		overall := health.StatusHealthy
		if status != health.StatusHealthy {
			overall = health.StatusUnhealthy
		}
		return health.Report{Status: overall,
			Checks: map[health.Code]health.Check{
				health.CheckGate:          {Status: status, Severity: health.SeverityCritical, Message: message},
				health.CheckHermesGateway: {Status: health.StatusHealthy, Severity: health.SeverityCritical, Message: "hermes gateway is RUNNING"},
			},
			Gate: &health.Gate{HermesVersion: "0.19.0", Mechanism: "smart-plugin", EffectiveMode: effective, IntendedMode: want}}
	}
	active := "approval gate of Hermes 0.19.0 (smart-plugin) active: approvals.mode smart as Hermes resolves it"
	notAsProvisioned := `approval gate of Hermes 0.19.0 (smart-plugin) is not as provisioned: approvals.mode resolves to "off", want "smart"`
	held := gatewayView{Mode: want}
	off := gatewayView{Mode: "off", MemoryProvider: "agentmem", MemoryLoaded: true}
	with := func(r health.Report, edit func(*health.Report)) health.Report { edit(&r); return r }

	for _, tc := range []struct {
		name   string
		rep    health.Report
		view   gatewayView
		marker bool
		ok     string // a passing verdict holds this
		err    string // a failing one this
	}{
		{name: "held", rep: gate(health.StatusHealthy, want, active), view: held, ok: "the gate held"},
		{name: "reported, the gateway bypassed", rep: gate(health.StatusUnhealthy, "off", notAsProvisioned), view: off, marker: true, ok: "unhealthy naming the gate"},
		{name: "reported, the gateway held", rep: gate(health.StatusUnhealthy, want, notAsProvisioned), view: held, ok: "unhealthy naming the gate"},
		{name: "silent: the gateway resolves off", rep: gate(health.StatusHealthy, want, active), view: gatewayView{Mode: "off"}, err: `the gateway resolves approvals.mode "off"`},
		{name: "silent: the agent's module ran", rep: gate(health.StatusHealthy, want, active), view: gatewayView{Mode: want, MemoryProvider: "agentmem"}, marker: true,
			err: "imported the agent's memory provider"},
		{name: "silent: both", rep: gate(health.StatusHealthy, want, active), view: off, marker: true, err: "the attack worked while the gate check stayed healthy"},
		{name: "healthy check reporting off", rep: gate(health.StatusHealthy, "off", active), view: held, err: `approvals.mode "off"`},
		{name: "healthy check without its object", rep: with(gate(health.StatusHealthy, want, active), func(r *health.Report) { r.Gate = nil }), view: held, err: "no gate object"},
		{name: "no gate check", rep: with(gate(health.StatusHealthy, want, active), func(r *health.Report) { delete(r.Checks, health.CheckGate) }), view: held, err: "no gate check"},
		{name: "no gate provisioned (info)", rep: with(gate(health.StatusHealthy, want, active), func(r *health.Report) {
			r.Checks[health.CheckGate] = health.Check{Status: health.StatusDegraded, Severity: health.SeverityInfo, Message: "no approval gate was provisioned"}
		}), view: held, err: "neither held nor reported"},
		{name: "gate unhealthy in a healthy report", rep: with(gate(health.StatusUnhealthy, "off", notAsProvisioned), func(r *health.Report) { r.Status = health.StatusHealthy }),
			view: off, err: "neither held nor reported"},
		{name: "held, but another check fails", rep: with(gate(health.StatusHealthy, want, active), func(r *health.Report) {
			r.Status = health.StatusUnhealthy
			r.Checks[health.CheckHermesGateway] = health.Check{Status: health.StatusUnhealthy, Severity: health.SeverityCritical, Message: "hermes gateway is BACKOFF"}
		}), view: held, err: "hermes-gateway unhealthy: hermes gateway is BACKOFF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := judgeGateAttack(tc.rep, tc.view, tc.marker, want)
			switch {
			case tc.ok != "" && (err != nil || !strings.Contains(got, tc.ok)):
				t.Errorf("judgeGateAttack = %q, %v; want a pass saying %q", got, err, tc.ok)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("judgeGateAttack = %q, %v; want an error saying %q", got, err, tc.err)
			}
		})
	}
}

// TestGatewayViewCommand: the view runs as the service user in the
// gateway's working directory with exactly the gateway's environment
// (boot.GatewayEnv: HERMES_HOME, HOME, PATH and the git settings), each
// entry a plain shell word.
func TestGatewayViewCommand(t *testing.T) {
	cmd := gatewayViewCommand()
	for _, want := range append([]string{"sudo -n -u hermes sh -c 'cd " + boxlayout.WorkDir + " && exec env -i ",
		"HERMES_HOME=" + boxlayout.HermesHome + " ", "HOME=/home/hermes ", "PATH=" + boxlayout.GatewayPath + " ",
		boxlayout.HermesVenv + "/bin/python - " + boxlayout.HermesTree + "'"}, boxlayout.GatewayGitEnv()...) {
		if !strings.Contains(cmd, want) {
			t.Errorf("the gateway view's command %q lacks %q", cmd, want)
		}
	}
}

// TestGateAttackScript runs testdata/gate-attack.py as the e2e step does,
// on a home of its own: plant writes the two attacks and reads them back,
// refuses to plant twice, and undo leaves the home as it was, byte for
// byte and mode for mode.
func TestGateAttackScript(t *testing.T) {
	python := os.Getenv("HERMES_BOX_HERMES_PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import yaml").Run(); err != nil {
		prerequisite(t, "%s with PyYAML is needed (HERMES_BOX_HERMES_PYTHON): %v", python, err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "gate-attack.py"))
	if err != nil {
		t.Fatal(err)
	}
	home, tmp := t.TempDir(), t.TempDir()
	marker := filepath.Join(tmp, "agentmem-ran")
	writeFile(t, filepath.Join(home, "config.yaml"), []byte("model:\n  provider: stand-in\napprovals: smart\n"), 0o600)
	writeFile(t, filepath.Join(home, ".env"), []byte("MCP_EXECUTOR_API_KEY=exk_x"), 0o600)
	writeFile(t, filepath.Join(home, "memories", "MEMORY.md"), []byte("kept\n"), 0o644)
	before := treeOf(t, home)
	run := func(verb string) (string, error) {
		cmd := exec.Command(python, "-", verb, home, marker)
		cmd.Stdin, cmd.Env = bytes.NewReader(script), append(os.Environ(), "TMPDIR="+tmp)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("plant")
	var p plantedAttack
	if err != nil || json.Unmarshal([]byte(lastLine(out)), &p) != nil {
		t.Fatalf("plant: %v\n%s", err, out)
	}
	if p.PolicyMode != "off" || p.UserMode != "off" || p.MemoryProvider != "agentmem" ||
		len(p.EnvManagedDir) != 1 || p.EnvManagedDir[0] != filepath.Join(home, "policy") || p.Provider != filepath.Join(home, "plugins", "agentmem", "__init__.py") {
		t.Errorf("planted: %+v", p)
	}
	if env := string(readFileT(t, filepath.Join(home, ".env"))); env != "MCP_EXECUTOR_API_KEY=exk_x\nHERMES_MANAGED_DIR="+filepath.Join(home, "policy")+"\n" {
		t.Errorf(".env after plant: %q", env)
	}
	module := string(readFileT(t, p.Provider))
	for _, want := range []string{"MemoryProvider", marker, `_approval._get_approval_mode = lambda: "off"`} {
		if !strings.Contains(module, want) {
			t.Errorf("the agent's module lacks %q:\n%s", want, module)
		}
	}
	if out, err := run("plant"); err == nil {
		t.Errorf("a second plant succeeded:\n%s", out)
	}
	writeFile(t, marker, []byte("imported\n"), 0o644) // as the module would
	if out, err := run("undo"); err != nil || !strings.Contains(out, `"markerRemoved": true`) {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if after := treeOf(t, home); after != before {
		t.Errorf("the home after undo:\n%s\nbefore:\n%s", after, before)
	}
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
		t.Errorf("left in the temporary directory: %v %v", ents, err)
	}
}

// treeOf lists every entry under root with its mode and contents.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, root) + " " + info.Mode().String())
		if d.Type().IsRegular() {
			b.WriteString(" " + string(readFileT(t, p)))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
