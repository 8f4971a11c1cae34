package gate

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// fakeRunner answers the probe with canned JSON and every other command
// (py_compile, the suite) with success; it records what ran.
type fakeRunner struct {
	mu    sync.Mutex
	probe string
	cmds  []command.Command
}

func (f *fakeRunner) Run(_ context.Context, c command.Command) (command.Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, c)
	if strings.Contains(strings.Join(c.Args, " "), "hermes-box-gate-probe-") {
		return command.Output{Stdout: []byte("noise\n" + withManagedDir(f.probe, c.Args[len(c.Args)-1]) + "\n")}, nil
	}
	return command.Output{}, nil
}

// withManagedDir is the probe's answer with the managed directory the
// patched Hermes reads, as Hermes finds it: the tree's record of it, else
// /etc/hermes (an answer that names one keeps it).
func withManagedDir(answer, tree string) string {
	var e map[string]any
	if json.Unmarshal([]byte(answer), &e) != nil || e["managedDir"] != "" {
		return answer
	}
	e["managedDir"] = "/etc/hermes"
	if b, err := os.ReadFile(filepath.Join(tree, patch.ManagedPointer)); err == nil {
		e["managedDir"] = filepath.Join(tree, strings.TrimSpace(string(b)))
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// intended is a probe answer with everything as the mechanism needs it.
func intended(m pins.GateMechanism) Effective {
	var e Effective
	e.Mode, e.CronMode = m.IntendedMode(), "deny"
	e.ManagedKeys = hermesconfig.ManagedKeys(hermesconfig.ManagedSettingsFor(m))
	e.Reviewer.Provider, e.Reviewer.Model, e.Reviewer.ReasoningEffort, e.Reviewer.ServiceTier, e.Reviewer.Timeout = "openai-codex", "gpt-5.5", "low", "priority", 30
	if m == pins.GateSmartPlugin {
		e.Timeout = 300
		e.Plugin = &PluginState{Found: true, Enabled: true, Hooks: []string{"post_approval_response", "pre_approval_request"}, Wrapped: true,
			Bundled: true, Source: "bundled"}
		return e
	}
	e.Timeout = 60
	gw, on, floor := 300.0, true, 0.75
	e.GatewayTimeout, e.Reviewer.Enabled, e.Reviewer.MinConfidence = &gw, &on, &floor
	e.Reviewer.Scope, e.Reviewer.MaxRisk = "once", "medium"
	return e
}

func TestVerify(t *testing.T) {
	smart, gated := release(t, "0.19.0"), release(t, "0.16.0")
	tests := []struct {
		name string
		rel  pins.HermesRelease
		edit func(*Effective)
		want string
	}{
		{"smart as intended", smart, func(*Effective) {}, ""},
		{"gated as intended", gated, func(*Effective) {}, ""},
		{"0.18-style manual", gated, func(e *Effective) { e.Mode = "manual" }, `approvals.mode resolves to "manual", want "gated"`},
		{"smart mode lost", smart, func(e *Effective) { e.Mode = "manual" }, `want "smart"`},
		{"plugin disabled", smart, func(e *Effective) { e.Plugin.Enabled, e.Plugin.Error = false, "disabled via config" }, "disabled via config"},
		{"plugin missing", smart, func(e *Effective) { e.Plugin = nil }, "does not find"},
		{"wraps missing", smart, func(e *Effective) { e.Plugin.Wrapped = false }, "wraps are not in place"},
		{"user copy overrides", smart, func(e *Effective) { e.Plugin.Bundled, e.Plugin.Source, e.Plugin.Path = false, "user", "/h/plugins/x" },
			"loaded the hermes-box-gate plugin from /h/plugins/x (user), not root's copy"},
		{"hook missing", smart, func(e *Effective) { e.Plugin.Hooks = e.Plugin.Hooks[:1] }, "did not register pre_approval_request"},
		{"gateway wait 60", smart, func(e *Effective) { e.Timeout = 60 }, "gateway wait"},
		{"other reviewer model", smart, func(e *Effective) { e.Reviewer.Model = "cheap" }, "reviewer model"},
		{"no priority tier", gated, func(e *Effective) { e.Reviewer.ServiceTier = "" }, "service tier"},
		{"cron approves", smart, func(e *Effective) { e.CronMode = "approve" }, "cron_mode"},
		{"no gateway_timeout", gated, func(e *Effective) { e.GatewayTimeout = nil }, "gateway_timeout"},
		{"gate disabled", gated, func(e *Effective) { off := false; e.Reviewer.Enabled = &off }, "disabled"},
		{"mode not managed", smart, func(e *Effective) { e.ManagedKeys = e.ManagedKeys[1:] }, "managed scope (/etc/hermes/config.yaml), so the agent could change them: approvals.mode"},
		{"nothing managed on 0.17", release(t, "0.17.0"), func(e *Effective) { e.ManagedKeys = nil }, "approvals.gate.model"},
		{"nothing managed on 0.16", gated, func(e *Effective) { e.ManagedKeys = nil }, "approvals.mode, approvals.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := intended(tt.rel.Mechanism)
			tt.edit(&e)
			got := strings.Join(Verify(tt.rel, e), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

func fixtureTarget(t *testing.T, version string, run command.Runner) Target {
	t.Helper()
	src := fixture(t, version)
	rel := release(t, version)
	write(t, src, ".git/HEAD", rel.Commit+"\n")
	return Target{Source: src, Python: "python3", Home: t.TempDir(), Managed: filepath.Join(t.TempDir(), "etc-hermes"), Commit: rel.Commit, Runner: run}
}

func answer(t *testing.T, e Effective) string {
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplySmartPluginOnFixture(t *testing.T) {
	run := &fakeRunner{probe: answer(t, intended(pins.GateSmartPlugin))}
	tgt := fixtureTarget(t, "0.19.0", run)
	write(t, tgt.Home, "config.yaml", "# mine\nmodel:\n  default: x # keep\n")
	ctx := context.Background()
	pending, err := Installer{}.Pending(ctx, tgt)
	if err != nil || len(pending) != 5 || !strings.Contains(pending[3], "managed scope") || !strings.Contains(pending[4], patch.ManagedPointer) {
		t.Fatalf("pending %q %v", pending, err)
	}
	if err := (Installer{}).Apply(ctx, tgt); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tgt.Source, "agent/auxiliary_client.py"); !strings.Contains(got, "hermes-box:gate-service-tier") {
		t.Errorf("service tier not forwarded:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(tgt.Source, patch.ModulePath)); err == nil {
		t.Error("the smart-plugin mechanism installed the source-patch reviewer module")
	}
	for name, want := range PluginFiles() {
		if got := read(t, tgt.Source, PluginDir+"/"+name); got != string(want) {
			t.Errorf("plugin file %s differs", name)
		}
	}
	cfg := read(t, tgt.Home, "config.yaml")
	for _, want := range []string{"# mine", "default: x # keep", "mode: smart", "- hermes-box-gate", "service_tier: priority", "timeout: 300"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if pending, err := (Installer{}).Pending(ctx, tgt); err != nil || len(pending) != 0 {
		t.Fatalf("after apply: pending %q %v", pending, err)
	}
	checkManaged(t, tgt, pins.GateSmartPlugin)
	c, g := Health(ctx, tgt, time.Unix(0, 0))
	if c.Status != health.StatusHealthy || g == nil || g.Mechanism != "smart-plugin" || g.EffectiveMode != "smart" {
		t.Fatalf("health %+v %+v", c, g)
	}
}

// checkManaged: the managed scope holds exactly the mechanism's settings,
// writable by its owner alone; a file others may write is pending.
func checkManaged(t *testing.T, tgt Target, m pins.GateMechanism) {
	t.Helper()
	want, err := hermesconfig.Managed(hermesconfig.ManagedSettingsFor(m))
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, tgt.Managed, "config.yaml"); got != string(want) {
		t.Fatalf("managed config:\n%s\nwant:\n%s", got, want)
	}
	for path, mode := range map[string]os.FileMode{tgt.Managed: 0o755 | os.ModeDir, tgt.managedConfig(): 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode(), err, mode)
		}
	}
	if err := os.Chmod(tgt.managedConfig(), 0o666); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(tgt.managedConfig(), 0o644)
	pending, err := Installer{}.Pending(context.Background(), tgt)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "writable by others than its owner") {
		t.Fatalf("pending %q %v", pending, err)
	}
}

func TestApplyFailsWhenHermesResolvesAnotherMode(t *testing.T) {
	bad := intended(pins.GateSmartPlugin)
	bad.Mode = "manual"
	run := &fakeRunner{probe: answer(t, bad)}
	tgt := fixtureTarget(t, "0.19.0", run)
	err := Installer{}.Apply(context.Background(), tgt)
	if err == nil || !strings.Contains(err.Error(), `approvals.mode resolves to "manual", want "smart"`) {
		t.Fatalf("got %v", err)
	}
	c, g := Health(context.Background(), tgt, time.Unix(0, 0))
	if c.Status != health.StatusUnhealthy || c.Severity != health.SeverityCritical || g.EffectiveMode != "manual" || len(g.Problems) != 1 {
		t.Fatalf("health %+v %+v", c, g)
	}
	pending, err := Installer{}.Pending(context.Background(), tgt)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "does not resolve the gate") {
		t.Fatalf("pending %q %v", pending, err)
	}
}

func TestHealthWithoutAGate(t *testing.T) {
	tgt := Target{Source: t.TempDir(), Runner: &fakeRunner{}}
	c, g := Health(context.Background(), tgt, time.Unix(0, 0))
	if c.Severity != health.SeverityInfo || g != nil {
		t.Fatalf("untouched tree: %+v", c)
	}
	run := &fakeRunner{probe: answer(t, intended(pins.GateSmartPlugin))}
	tgt = fixtureTarget(t, "0.19.0", run)
	if err := patch.WriteSourceMarker(tgt.Source, tgt.Commit); err != nil {
		t.Fatal(err)
	}
	c, g = Health(context.Background(), tgt, time.Unix(0, 0))
	if c.Status != health.StatusUnhealthy || g == nil || !strings.Contains(c.Message, "source edits are not in place") {
		t.Fatalf("recorded but unpatched tree: %+v", c)
	}
}

func TestProbeRunsAsTheHermesUser(t *testing.T) {
	run := &fakeRunner{probe: answer(t, intended(pins.GateSmartPlugin))}
	tgt := fixtureTarget(t, "0.19.0", run)
	tgt.User, tgt.WorkDir = "hermes", t.TempDir()
	if _, err := Probe(context.Background(), tgt, release(t, "0.19.0")); err != nil {
		t.Fatal(err)
	}
	// As the gateway: in its working directory, with its PATH and git
	// settings, and no managed directory of the probe's own.
	c := run.cmds[0]
	if c.Path != "runuser" || strings.Join(c.Args[:4], " ") != "-u hermes -- python3" || c.Args[5] != "smart-plugin" ||
		c.Args[6] != tgt.Source || c.Dir != tgt.WorkDir {
		t.Fatalf("%+v", c)
	}
	env := strings.Join(c.Env, " ")
	if !strings.Contains(env, "HERMES_HOME="+tgt.Home) || !strings.Contains(env, "GIT_CONFIG_KEY_0=core.fsmonitor") ||
		!strings.Contains(env, "PATH="+boxlayout.GatewayPath) || strings.Contains(env, "HERMES_MANAGED_DIR") {
		t.Fatalf("env %q", c.Env)
	}
	run.probe = "not json"
	if _, err := Probe(context.Background(), tgt, release(t, "0.19.0")); err == nil || !strings.Contains(err.Error(), "unreadable answer") {
		t.Fatalf("got %v", err)
	}
	// A missing working directory is named, and nothing runs (exec would
	// name the interpreter as the missing file).
	tgt.WorkDir = filepath.Join(tgt.WorkDir, "gone")
	ran := len(run.cmds)
	if _, err := Probe(context.Background(), tgt, release(t, "0.19.0")); err == nil ||
		!strings.Contains(err.Error(), "working directory "+tgt.WorkDir+" is missing") || len(run.cmds) != ran {
		t.Fatalf("got %v, %d runs", err, len(run.cmds)-ran)
	}
}

// TestInstallRealTrees installs the gate into copies of the real 0.16.0,
// 0.17.0 and 0.19.0 trees (HERMES_BOX_HERMES_TREES) with this machine's
// python3 (or HERMES_BOX_HERMES_PYTHON) as Hermes' interpreter and asks each
// Hermes for its effective mode. The settings are pinned in the managed
// scope, so every gate key is reported managed and mode off (and an
// allowlist entry) in the user's config changes nothing until the managed
// config is removed; on 0.17.0 and 0.19.0 Hermes' own `hermes config set`
// refuses approvals.mode, command_allowlist (and 0.19.0's approvals.deny).
// It also shows 0.18.2
// with the source-patch config seeded resolving to manual.
func TestInstallRealTrees(t *testing.T) {
	python := hermestest.Python(t)
	for _, version := range []string{"0.16.0", "0.17.0", "0.19.0"} {
		t.Run(version, func(t *testing.T) {
			rel := release(t, version)
			src := hermestest.CopyTree(t, realTree(t, version))
			if err := patch.WriteSourceMarker(src, rel.Commit); err != nil {
				t.Fatal(err)
			}
			tgt := Target{Source: src, Python: python, Home: t.TempDir(), Managed: filepath.Join(t.TempDir(), "etc-hermes"),
				Commit: rel.Commit, Runner: command.ExecRunner{}, Verdicts: verdictsIn(t.TempDir())}
			ctx := context.Background()
			if err := (Installer{Integration: true}).Apply(ctx, tgt); err != nil {
				t.Fatal(err)
			}
			// Hermes' own code left every input of the key as it was, so
			// the install's verdict is kept for the health checks.
			if _, err := os.Stat(tgt.Verdicts.Path); err != nil {
				t.Fatalf("no verdict kept after the install's probe: %v", err)
			}
			if pyc, _ := filepath.Glob(filepath.Join(src, "tools", "__pycache__", "approval.*.pyc")); len(pyc) != 1 {
				t.Errorf("the install left no bytecode of tools/approval.py: %q", pyc)
			}
			if pending, err := (Installer{}).Pending(ctx, tgt); err != nil || len(pending) != 0 {
				t.Fatalf("pending after apply: %q %v", pending, err)
			}
			intended := rel.Mechanism.IntendedMode()
			c, g := Health(ctx, tgt, time.Now())
			if c.Status != health.StatusHealthy || g.EffectiveMode != intended {
				t.Fatalf("%+v %+v", c, g)
			}
			eff, err := Probe(ctx, tgt, rel)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Hermes %s: %s; reviewer %+v resolved by %q; managed keys %q", version, c.Message, eff.Reviewer, eff.ResolvedBy, eff.ManagedKeys)
			for _, f := range gateFiles(t, tgt, rel) {
				if problem := exclusive(f); problem != "" {
					t.Errorf("gate file: %s", problem)
				}
			}
			if rel.Mechanism == pins.GateSmartPlugin {
				userCopyIgnored(t, tgt, rel)
			}
			if rel.ManagedScope {
				stderr := hermesConfigSet(t, tgt, "approvals.mode", "off")
				t.Logf("Hermes %s refused `hermes config set approvals.mode off`: %s", version, stderr)
				hermesConfigSet(t, tgt, "command_allowlist", "*")
				if rel.Mechanism == pins.GateSmartPlugin {
					hermesConfigSet(t, tgt, "approvals.deny", "[]")
				}
			}
			b, _ := os.ReadFile(filepath.Join(tgt.Home, "config.yaml"))
			write(t, tgt.Home, "config.yaml", strings.Replace(string(b), "mode: "+intended, "mode: off", 1)+"command_allowlist:\n- '*'\n")
			c, g = Health(ctx, tgt, time.Now())
			if c.Status != health.StatusHealthy || g.EffectiveMode != intended {
				t.Fatalf("mode off in the user's config overrode the managed scope: %+v %+v", c, g)
			}
			if err := os.Remove(tgt.managedConfig()); err != nil {
				t.Fatal(err)
			}
			if c, g := Health(ctx, tgt, time.Now()); c.Status != health.StatusUnhealthy || g.EffectiveMode != "off" {
				t.Fatalf("without the managed config the user's mode off must show: %+v %+v", c, g)
			}
		})
	}
	t.Run("0.18.2", func(t *testing.T) {
		// The box's config as provisioning seeds it for the source-patch
		// gate (hermesconfig.SeedFileWith with that mechanism's settings,
		// what Installer.Apply writes on 0.16/0.17), under Hermes 0.18.2.
		home := t.TempDir()
		gated := release(t, "0.16.0")
		wrote, err := hermesconfig.SeedFileWith(filepath.Join(home, "config.yaml"), hermesconfig.SettingsFor(gated.Mechanism))
		if err != nil || !wrote {
			t.Fatalf("seeding: wrote %v, %v", wrote, err)
		}
		if cfg := read(t, home, "config.yaml"); !strings.Contains(cfg, "mode: gated") {
			t.Fatalf("seeded config lacks mode: gated:\n%s", cfg)
		}
		tgt := Target{Source: realTree(t, "0.18.2"), Python: python, Home: home, Runner: command.ExecRunner{}}
		eff, err := Probe(context.Background(), tgt, gated)
		if err != nil {
			t.Fatal(err)
		}
		if eff.Mode != "manual" || !strings.Contains(strings.Join(Verify(gated, eff), ";"), `resolves to "manual"`) {
			t.Fatalf("%+v", eff)
		}
	})
}

// TestReviewerCodexRequestRealTree installs the gate into a copy of the real
// 0.19.0 tree (the service-tier source edit, the plugin, the seeded config)
// and runs testdata/codex_request.py there: the plugin's reviewer call goes
// through Hermes' own call_llm(task="approval") and Codex adapter, and only
// the OpenAI client is a stand-in that captures responses.create's kwargs.
// The request must carry the priority service tier, the model and low
// reasoning; the unedited tree sends no service_tier.
func TestReviewerCodexRequestRealTree(t *testing.T) {
	tree := realTree(t, "0.19.0")
	python := hermestest.Python(t)
	rel := release(t, "0.19.0")
	src := hermestest.CopyTree(t, tree)
	if err := patch.WriteSourceMarker(src, rel.Commit); err != nil {
		t.Fatal(err)
	}
	tgt := Target{Source: src, Python: python, Home: t.TempDir(), Managed: filepath.Join(t.TempDir(), "etc-hermes"), Commit: rel.Commit,
		Runner: command.ExecRunner{}}
	if err := (Installer{}).Apply(context.Background(), tgt); err != nil {
		t.Fatal(err)
	}
	req := codexRequest(t, tgt)
	if req.Decision != "approve" || req.Calls != 1 {
		t.Fatalf("the reviewer did not reach the Codex adapter once with an approve verdict back: %+v", req)
	}
	if req.Request.ServiceTier != "priority" {
		t.Errorf("the reviewer's Codex request has service_tier %q, want \"priority\"", req.Request.ServiceTier)
	}
	if req.Request.Model != "gpt-5.5" || req.Request.Reasoning.Effort != "low" || !req.Request.Stream {
		t.Errorf("the reviewer's Codex request: %+v", req.Request)
	}
	if len(req.BaseURL) != 1 || req.BaseURL[0] != "https://chatgpt.com/backend-api/codex" {
		t.Errorf("the reviewer's client was built for %q, want the Codex endpoint", req.BaseURL)
	}
	unedited := tgt
	unedited.Source = tree
	t.Setenv("HBX_TEST_GATE_PLUGINS", filepath.Join(src, "plugins")) // the plugin as installed, with the unedited tree
	if req := codexRequest(t, unedited); req.Calls != 1 || req.Request.ServiceTier != "" {
		t.Errorf("the unedited 0.19.0 tree: %+v (the source edit is what forwards the tier)", req)
	}
}

type codexCapture struct {
	Decision string   `json:"decision"`
	Calls    int      `json:"calls"`
	BaseURL  []string `json:"baseURL"`
	Request  struct {
		Model       string `json:"model"`
		ServiceTier string `json:"service_tier"`
		Stream      bool   `json:"stream"`
		Reasoning   struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	} `json:"request"`
}

func codexRequest(t *testing.T, tgt Target) codexCapture {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "codex_request.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tgt.Python, script)
	cmd.Dir = tgt.Source
	cmd.Env = append(os.Environ(), "HERMES_HOME="+tgt.Home, "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s(agent.auxiliary_client needs Hermes' dependencies, httpx among them: "+
			"HERMES_BOX_HERMES_PYTHON names an interpreter that has them)", tgt.Python, script, tgt.Source, err, stderr.String())
	}
	var c codexCapture
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("unreadable capture %q: %v", out, err)
	}
	return c
}

// hermesConfigSet runs the tree's own `hermes config set KEY VALUE` (its
// hermes_cli.main, as the launcher does) and wants it refused because the
// managed scope pins KEY; it returns what Hermes printed on stderr. The
// user's config must be unchanged.
func hermesConfigSet(t *testing.T, tgt Target, key, value string) string {
	t.Helper()
	before := read(t, tgt.Home, "config.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tgt.Python, "-m", "hermes_cli.main", "config", "set", key, value)
	cmd.Dir = tgt.Source
	cmd.Env = append(os.Environ(), "HERMES_HOME="+tgt.Home, "HERMES_MANAGED_DIR="+tgt.Managed, "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil || !strings.Contains(stderr.String(), "Cannot set '"+key+"': it is managed by your administrator ("+tgt.managedConfig()+")") {
		t.Fatalf("hermes config set %s %s: %v, stderr:\n%s", key, value, err, stderr.String())
	}
	if after := read(t, tgt.Home, "config.yaml"); after != before {
		t.Fatalf("hermes config set %s changed the user's config:\n%s", key, after)
	}
	return strings.TrimSpace(stderr.String())
}

// gateFiles lists every file of the installed gate: the edited sources and
// the reviewer module, the plugin and its directory, the managed config and
// its directory.
func gateFiles(t *testing.T, tgt Target, rel pins.HermesRelease) []string {
	t.Helper()
	set, err := patch.SetByID(rel.AnchorSet)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range set.Files() {
		out = append(out, filepath.Join(tgt.Source, f))
	}
	if set.Reviewer {
		out = append(out, filepath.Join(tgt.Source, patch.ModulePath))
	}
	if rel.Mechanism == pins.GateSmartPlugin {
		out = append(out, filepath.Join(tgt.Source, PluginDir))
		for name := range PluginFiles() {
			out = append(out, filepath.Join(tgt.Source, PluginDir, name))
		}
	}
	return append(out, tgt.Managed, tgt.managedConfig())
}

// userCopyOverrides puts a copy of the plugin in HERMES_HOME/plugins, where
// Hermes prefers it to the tree's: the health check names it, and the
// installer removes it.
func userCopyIgnored(t *testing.T, tgt Target, rel pins.HermesRelease) {
	t.Helper()
	ctx := context.Background()
	for name, data := range PluginFiles() {
		write(t, tgt.Home, UserPluginDir+"/"+name, string(data))
	}
	c, g := Health(ctx, tgt, time.Now())
	eff, err := Probe(ctx, tgt, rel)
	if err != nil || c.Status != health.StatusHealthy || eff.Plugin == nil || !eff.Plugin.Bundled {
		t.Fatalf("Hermes loaded a plugin from HERMES_HOME: %+v %+v %+v %v", c, g, eff.Plugin, err)
	}
	pending, err := Installer{}.Pending(ctx, tgt)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "remove the overriding copy") {
		t.Fatalf("pending %q %v", pending, err)
	}
	if err := (Installer{}).Apply(ctx, tgt); err != nil {
		t.Fatal(err)
	}
	if c, _ := Health(ctx, tgt, time.Now()); c.Status != health.StatusHealthy {
		t.Fatalf("after removing the user copy: %+v", c)
	}
}
