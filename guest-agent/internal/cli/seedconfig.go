package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

func runSeedConfig(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "seed-config", "[--file PATH] [--commit SHA]")
	file := fs.String("file", "", "Hermes config file (default <root>/"+boxlayout.HermesConfig+")")
	commit := fs.String("commit", pins.DefaultHermesCommit, "the pinned Hermes commit whose gate mechanism the settings are for")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *file == "" {
		*file = filepath.Join(e.root, boxlayout.HermesConfig)
	}
	rel, err := pins.Hermes(*commit)
	if err != nil {
		return err
	}
	changed, err := hermesconfig.SeedFileWith(*file, hermesconfig.SettingsFor(rel.Mechanism))
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
