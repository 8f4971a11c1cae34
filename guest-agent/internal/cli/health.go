package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/gate"
	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/health"
)

// started is when this agent process started.
var started = time.Now()

func runHealth(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "health", "[--json] [--deep] [--workspace PATH]")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	deep := fs.Bool("deep", false, "also run the installed tools (hermes, python, node, npm, tmux, infocmp, codex), as init's readiness does")
	workspace := fs.String("workspace", "", "workspace path (default <root>/workspace)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *workspace == "" {
		*workspace = filepath.Join(e.root, "workspace")
	}
	report := probe.Collect(probe.Options{Workspace: *workspace, Version: buildinfo.Version, Started: started})
	addServiceHealth(ctx, e, report)
	addGateHealth(ctx, e, report)
	addToolHealth(ctx, e, report, *deep)
	if *asJSON {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return fmt.Errorf("writing health report: %w", err)
		}
		return nil
	}
	return printHealth(e, report)
}

func printHealth(e *env, r *health.Report) error {
	if _, err := fmt.Fprintf(e.Out, "status: %s\n", r.Status); err != nil {
		return err
	}
	for code, c := range r.Checks {
		fmt.Fprintf(e.Out, "  %-16s %-9s %s\n", code, c.Status, c.Message)
	}
	for _, s := range r.Services {
		fmt.Fprintf(e.Out, "  %-16s %-9s pid %d restarts %d\n", s.Name, s.State, s.PID, s.Restarts)
	}
	return nil
}

// addGateHealth adds the "gate" check: the approval gate of the installed
// Hermes, with the effective mode read from Hermes itself.
func addGateHealth(ctx context.Context, e *env, r *health.Report) {
	c, g := gateHealth(ctx, e)
	r.Checks[health.CheckGate], r.Gate = c, g
	r.Summarize()
}

// gateHealth is the gate check of the box's Hermes; the verdict it asks
// Hermes for, and its verification of the gate's source edits, are kept
// for the next check of the same inputs.
func gateHealth(ctx context.Context, e *env) (health.Check, *health.Gate) {
	src := filepath.Join(e.root, boxlayout.HermesTree)
	t := gate.Target{Source: src, Python: filepath.Join(src, "venv", "bin", "python"),
		Home: filepath.Dir(filepath.Join(e.root, boxlayout.HermesConfig)), Managed: filepath.Join(e.root, boxlayout.HermesManagedDir), WorkDir: filepath.Join(e.root, boxlayout.WorkDir),
		Runner: command.ExecRunner{}, Verdicts: gate.NewVerdictCache(filepath.Join(e.root, boxlayout.GateVerdictCache),
			filepath.Join(e.root, boxlayout.GateAnchorsCache))}
	if e.root == "/" {
		t.User = "hermes"
	}
	return gate.Health(ctx, t, time.Now().UTC())
}
