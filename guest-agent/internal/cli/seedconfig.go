package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
)

var seedConfigVerb = verb{
	name:    "seed-config",
	summary: "set Hermes' approvals (gated), security and terminal backend in config.yaml, keeping the rest",
	run:     runSeedConfig,
}

func runSeedConfig(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "seed-config", "[--file PATH]")
	file := fs.String("file", "", "Hermes config file (default <root>/"+hermesconfig.DefaultPath+")")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *file == "" {
		*file = filepath.Join(e.root, hermesconfig.DefaultPath)
	}
	changed, err := hermesconfig.SeedFile(*file)
	if err != nil {
		return err
	}
	state := "already seeded, unchanged"
	if changed {
		state = "seeded"
	}
	_, err = fmt.Fprintf(e.Out, "%s: %s\n", *file, state)
	return err
}
