package gate

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

//go:embed probe.py
var probeScript []byte

// ProbeTimeout bounds one run of the probe (Hermes imports take seconds).
const ProbeTimeout = 2 * time.Minute

// compileTimeout bounds the install's run of the probe that also writes
// the bytecode of everything it imports: compiling them from source takes
// several times a probe's CPU, and minutes under emulation (TCG).
const compileTimeout = 10 * time.Minute

// Target is an installed Hermes: host paths of its source tree, its
// interpreter and its HERMES_HOME, the commit it holds, and how to run it.
type Target struct {
	Source string
	Python string
	Home   string
	// Managed is Hermes' managed-scope directory (boxlayout.HermesManagedDir
	// under the root), where releases that have one get the gate's settings.
	// The gate step records it in the tree (patch.ManagedPointer): Hermes
	// reads no other, whatever its environment says.
	Managed string
	// WorkDir is the gateway's working directory (boxlayout.WorkDir under
	// the root), where the probe runs as the gateway does; empty: Source.
	WorkDir string
	Commit  string
	// User, when set, runs the probe as that account (runuser), so Hermes
	// writes nothing as root into its home.
	User   string
	Runner command.Runner
	// Verdicts, when set, keeps the probe's last answer (verdict.go).
	Verdicts *VerdictCache
}

// Effective is the gate as the installed Hermes resolves it (probe.py).
type Effective struct {
	Python         string   `json:"python"`
	Mode           string   `json:"mode"`
	Timeout        float64  `json:"timeout"`
	GatewayTimeout *float64 `json:"gatewayTimeout,omitempty"`
	CronMode       string   `json:"cronMode"`
	ResolvedBy     string   `json:"resolvedBy,omitempty"`
	Reviewer       struct {
		Provider        string   `json:"provider"`
		Model           string   `json:"model"`
		ReasoningEffort string   `json:"reasoningEffort"`
		ServiceTier     string   `json:"serviceTier"`
		Timeout         float64  `json:"timeout"`
		Enabled         *bool    `json:"enabled,omitempty"`
		Scope           string   `json:"scope,omitempty"`
		MinConfidence   *float64 `json:"minConfidence,omitempty"`
		MaxRisk         string   `json:"maxRisk,omitempty"`
	} `json:"reviewer"`
	// ManagedKeys are the dotted keys the managed scope pins, as
	// hermes_cli.managed_scope reads them (from 0.17.0), or the source
	// patch's reviewer module on 0.16.0.
	ManagedKeys []string `json:"managedKeys,omitempty"`
	// ManagedDir is the managed directory Hermes reads.
	ManagedDir string `json:"managedDir"`
	// MemoryProvider is memory.provider as Hermes resolves it, and
	// MemoryProviderPath the directory plugins.memory would import it from
	// (empty: none found, nothing is imported).
	MemoryProvider     string       `json:"memoryProvider"`
	MemoryProviderPath string       `json:"memoryProviderPath,omitempty"`
	ContextEngine      string       `json:"contextEngine"`
	Plugin             *PluginState `json:"plugin,omitempty"`
}

// PluginState is the hermes-box-gate plugin as Hermes' plugin manager
// loaded it.
type PluginState struct {
	Found   bool     `json:"found"`
	Enabled bool     `json:"enabled"`
	Error   string   `json:"error"`
	Hooks   []string `json:"hooks"`
	Wrapped bool     `json:"wrapped"`
	// Bundled is true when Hermes loaded the copy in the tree's plugins/
	// (root's); Source and Path say which copy it loaded.
	Bundled bool   `json:"bundled"`
	Source  string `json:"source"`
	Path    string `json:"path"`
}

// Probe runs Hermes' own code, with its own interpreter, to read how it
// resolves the approval settings of rel's mechanism. It changes nothing.
func Probe(ctx context.Context, t Target, rel pins.HermesRelease) (Effective, error) {
	out, err := runProbe(ctx, t, rel, "hermes-box-gate-probe-*.py", ProbeTimeout, "PYTHONDONTWRITEBYTECODE=1")
	if err != nil {
		return Effective{}, fmt.Errorf("asking the installed Hermes for its approval settings: %w", err)
	}
	var eff Effective
	line := bytes.TrimSpace(out.Stdout)
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal(line, &eff); err != nil {
		return Effective{}, fmt.Errorf("asking the installed Hermes for its approval settings: unreadable answer %q: %w", line, err)
	}
	return eff, nil
}

// runProbe runs probe.py, saved under pattern, with t's interpreter, home
// and account, and env added, for at most timeout.
func runProbe(ctx context.Context, t Target, rel pins.HermesRelease, pattern string, timeout time.Duration, env ...string) (command.Output, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return command.Output{}, fmt.Errorf("probing the approval gate: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(probeScript); err != nil {
		f.Close()
		return command.Output{}, fmt.Errorf("probing the approval gate: %w", err)
	}
	if err := f.Close(); err != nil {
		return command.Output{}, fmt.Errorf("probing the approval gate: %w", err)
	}
	// As the supervisor starts the gateway (boot.GatewayEnv): its home, PATH
	// and git settings, in its working directory, and no managed directory
	// of the probe's own; probe.py loads .env as the gateway does.
	dir := t.WorkDir
	if dir == "" {
		dir = t.Source
	}
	// exec names the interpreter when the directory is missing; say which.
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return command.Output{}, fmt.Errorf("probing the approval gate: the gateway's working directory %s is missing or not a directory (boot prepares it)", dir)
	}
	c := command.Command{Path: t.Python, Args: []string{f.Name(), string(rel.Mechanism), t.Source}, Dir: dir, Timeout: timeout,
		Env: append(append([]string{"HERMES_HOME=" + t.Home, "PATH=" + boxlayout.GatewayPath, "PYTHONNOUSERSITE=1"},
			boxlayout.GatewayGitEnv()...), env...)}
	if t.User != "" {
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			return command.Output{}, fmt.Errorf("probing the approval gate: %w", err)
		}
		c.Args = append([]string{"-u", t.User, "--", c.Path}, c.Args...)
		c.Path = "runuser"
		c.Env = append(c.Env, "HOME="+filepath.Join("/home", t.User))
	}
	return t.Runner.Run(ctx, c)
}

// Verify lists every way eff differs from what rel's mechanism needs;
// empty means the gate is active as provisioned.
func Verify(rel pins.HermesRelease, eff Effective) []string {
	var p problems
	want := rel.Mechanism.IntendedMode()
	p.want("approvals.mode", eff.Mode, want)
	p.want("approvals.cron_mode", eff.CronMode, "deny")
	r := eff.Reviewer
	p.want("reviewer provider", r.Provider, "openai-codex")
	p.want("reviewer model", r.Model, "gpt-5.5")
	p.want("reviewer reasoning effort", r.ReasoningEffort, "low")
	p.want("reviewer service tier", r.ServiceTier, "priority")
	p.wantNum("reviewer timeout", r.Timeout, 30)
	switch rel.Mechanism {
	case pins.GateSourcePatch:
		p.wantNum("approvals.timeout (human wait)", eff.Timeout, 60)
		gw := math.NaN()
		if eff.GatewayTimeout != nil {
			gw = *eff.GatewayTimeout
		}
		p.wantNum("approvals.gateway_timeout", gw, 300)
		if r.Enabled == nil || !*r.Enabled {
			p.add("the gate reviewer is disabled (approvals.gate.enabled)")
		}
		p.want("reviewer scope", r.Scope, "once")
		if r.MinConfidence == nil || *r.MinConfidence < 0.75 {
			p.add("reviewer confidence floor below 0.75")
		}
		p.want("reviewer risk ceiling", r.MaxRisk, "medium")
	case pins.GateSmartPlugin:
		p.wantNum("approvals.timeout (gateway wait)", eff.Timeout, 300)
		p.plugin(eff)
	}
	p.managed(rel, eff)
	return p.list
}

type problems struct{ list []string }

func (p *problems) add(s string) { p.list = append(p.list, s) }

func (p *problems) want(what, got, want string) {
	if got != want {
		p.add(fmt.Sprintf("%s resolves to %q, want %q", what, got, want))
	}
}

func (p *problems) wantNum(what string, got, want float64) {
	if got != want {
		p.add(fmt.Sprintf("%s resolves to %v, want %v", what, got, want))
	}
}

// managed names every key of the mechanism the managed scope does not pin.
func (p *problems) managed(rel pins.HermesRelease, eff Effective) {
	var loose []string
	for _, key := range hermesconfig.ManagedKeys(hermesconfig.ManagedSettingsFor(rel.Mechanism)) {
		if !slices.Contains(eff.ManagedKeys, key) {
			loose = append(loose, key)
		}
	}
	if len(loose) > 0 {
		p.add(fmt.Sprintf("not pinned in the managed scope (%s/config.yaml), so the agent could change them: %s",
			boxlayout.HermesManagedDir, strings.Join(loose, ", ")))
	}
}

func (p *problems) plugin(eff Effective) {
	pl := eff.Plugin
	switch {
	case pl == nil || !pl.Found:
		p.add("Hermes does not find the " + hermesconfig.PluginName + " plugin")
	case !pl.Enabled:
		p.add(fmt.Sprintf("the %s plugin is not loaded: %s", hermesconfig.PluginName, pl.Error))
	default:
		for _, h := range []string{"pre_approval_request", "post_approval_response"} {
			if !slices.Contains(pl.Hooks, h) {
				p.add("the plugin did not register " + h)
			}
		}
		if !pl.Wrapped {
			p.add("the plugin's reviewer, gateway-wait and CLI-prompt wraps are not in place")
		}
		if !pl.Bundled {
			p.add(fmt.Sprintf("Hermes loaded the %s plugin from %s (%s), not root's copy in the Hermes tree's %s",
				hermesconfig.PluginName, pl.Path, pl.Source, PluginDir))
		}
	}
}
