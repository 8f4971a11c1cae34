package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/gate"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// runPatch accepts `patch hermes [flags] [DIR]` and `patch --check DIR`.
func runPatch(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "hermes" {
		args = args[1:]
	}
	fs := newFlags(e, "patch", "hermes [--root DIR] [--commit SHA] [--config FILE] [--no-seed] [--check] [--json] [DIR]")
	dir := fs.String("root", "", "Hermes source tree (default <root>/"+boxlayout.HermesTree+")")
	commit := fs.String("commit", pins.DefaultHermesCommit, "the pinned Hermes commit the tree must hold")
	check := fs.Bool("check", false, "only check DIR: name its version and gate mechanism and count every anchor, hook, config key and flag the mechanism relies on; write nothing")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	config := fs.String("config", "", "Hermes config to seed afterwards (default <root>/"+boxlayout.HermesConfig+")")
	noSeed := fs.Bool("no-seed", false, "do not seed the Hermes config")
	python := fs.String("python", "", "Python for byte-compiling and the suite (default: the tree's venv, else python3)")
	noIntegration := fs.Bool("no-integration", false, "run the suite without driving the patched tools.approval (for trees without Hermes' dependencies)")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() == 1 {
		*dir = fs.Arg(0)
	}
	if *dir == "" {
		*dir = filepath.Join(e.root, boxlayout.HermesTree)
	}
	if *check {
		return runPatchCheck(e, *dir, *asJSON)
	}
	p := &patch.Patcher{Runner: command.ExecRunner{}, Python: *python, Integration: !*noIntegration}
	res, err := p.Patch(ctx, *dir, *commit)
	if err != nil {
		return err
	}
	if !*noSeed {
		if *config == "" {
			*config = filepath.Join(e.root, boxlayout.HermesConfig)
		}
		if err := seedGate(*commit, *dir, *config, filepath.Join(e.root, boxlayout.HermesManagedDir)); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(e.Out).Encode(res)
	}
	if res.AlreadyPatched {
		_, err = fmt.Fprintf(e.Out, "%s: already patched for Hermes %s (%s); verified, nothing changed\n", *dir, res.Version, res.Set)
		return err
	}
	_, err = fmt.Fprintf(e.Out, "%s: patched Hermes %s with %s: %s\n", *dir, res.Version, res.Set, strings.Join(res.Written, ", "))
	return err
}

// seedGate installs the release's plugin, if its mechanism has one, into
// the tree at source, seeds config for the mechanism, pins it in the managed scope
// where the release has one and records that directory in the tree.
func seedGate(commit, source, config, managed string) error {
	rel, err := pins.Hermes(commit)
	if err != nil {
		return err
	}
	if rel.Mechanism == pins.GateSmartPlugin {
		if err := gate.InstallPlugin(source, filepath.Dir(config)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(config), 0o755); err != nil {
		return fmt.Errorf("seeding Hermes config: %w", err)
	}
	if _, err := hermesconfig.SeedFileWith(config, hermesconfig.SettingsFor(rel.Mechanism)); err != nil {
		return err
	}
	if err := gate.WriteManaged(managed, rel); err != nil {
		return err
	}
	// The tree records the managed directory Hermes reads (relative to the
	// tree), as the gate step does.
	return gate.WritePointer(source, managed)
}

func runPatchCheck(e *env, dir string, asJSON bool) error {
	rep, err := gate.Check(dir)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(e.Out).Encode(rep); err != nil {
			return err
		}
	} else {
		printCheck(e, rep)
	}
	if !rep.Accepted {
		return &exitError{code: 1, err: fmt.Errorf("%s: refused: %s", dir, rep.Reason)}
	}
	return nil
}

func printCheck(e *env, rep gate.Report) {
	if rep.Mechanism == "" {
		fmt.Fprintf(e.Out, "Hermes %s: refused: %s\n", rep.Version, rep.Reason)
		return
	}
	state := "accepted"
	if !rep.Accepted {
		state = "refused"
	}
	fmt.Fprintf(e.Out, "Hermes %s (%s): mechanism %s: %s\n", rep.Version, rep.Commit[:12], rep.Mechanism, state)
	for _, f := range rep.Found {
		mark := "ok"
		if f.Count != 1 {
			mark = "DRIFT"
		}
		note := ""
		if f.Missing {
			note = " (file missing)"
		}
		fmt.Fprintf(e.Out, "  %-5s %-6s %-44s %-34s %d%s\n", mark, f.Kind, f.Label, f.File, f.Count, note)
	}
	if !rep.Accepted {
		fmt.Fprintf(e.Out, "refused: %s\n", rep.Reason)
	}
}
