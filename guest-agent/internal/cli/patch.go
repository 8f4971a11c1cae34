package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// hermesSourceDir is where the installer puts Hermes, relative to the root.
const hermesSourceDir = "usr/local/lib/hermes-agent"

var patchVerb = verb{
	name:    "patch",
	summary: "add gated approval to the Hermes tree (hermes [--root DIR] [--commit SHA]), or --check DIR",
	run:     runPatch,
}

// runPatch accepts `patch hermes [flags] [DIR]` and `patch --check DIR`.
func runPatch(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "hermes" {
		args = args[1:]
	}
	fs := newFlags(e, "patch", "hermes [--root DIR] [--commit SHA] [--config FILE] [--no-seed] [--check] [--json] [DIR]")
	dir := fs.String("root", "", "Hermes source tree (default <root>/"+hermesSourceDir+")")
	commit := fs.String("commit", pins.DefaultHermesCommit, "the pinned Hermes commit the tree must hold")
	check := fs.Bool("check", false, "only count every supported anchor set's anchors in DIR; write nothing")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	config := fs.String("config", "", "Hermes config to seed afterwards (default <root>/"+hermesconfig.DefaultPath+")")
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
		*dir = filepath.Join(e.root, hermesSourceDir)
	}
	if *check {
		return runPatchCheck(e, *dir, *asJSON)
	}
	p := &patch.Patcher{Python: *python, Integration: !*noIntegration}
	res, err := p.Patch(ctx, *dir, *commit)
	if err != nil {
		return err
	}
	if !*noSeed {
		if *config == "" {
			*config = filepath.Join(e.root, hermesconfig.DefaultPath)
		}
		if _, err := hermesconfig.SeedFile(*config); err != nil {
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

func runPatchCheck(e *env, dir string, asJSON bool) error {
	rep, err := patch.Check(dir)
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
	if len(rep.Matching) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("%s: no supported anchor set matches (see the counts above)", dir)}
	}
	return nil
}

func printCheck(e *env, rep patch.Report) {
	for _, s := range rep.Sets {
		state := "drifted"
		if s.Match {
			state = "matches"
		}
		fmt.Fprintf(e.Out, "%s (Hermes %s, %s): %s\n", s.ID, s.Version, s.Commit[:12], state)
		for _, a := range s.Anchors {
			mark := "ok"
			if a.Count != 1 {
				mark = "DRIFT"
			}
			note := ""
			if a.Missing {
				note = " (file missing)"
			}
			fmt.Fprintf(e.Out, "  %-5s %-32s %-26s %d%s\n", mark, a.Label, a.File, a.Count, note)
		}
	}
	if len(rep.Matching) > 0 {
		fmt.Fprintf(e.Out, "match: %s\n", strings.Join(rep.Matching, ", "))
	}
}
