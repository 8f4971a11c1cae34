package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
)

func runBoot(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "boot", "[--table FILE]")
	tableFile := fs.String("table", "", "program table as JSON instead of the box's (tests)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	cfg := boot.Config{Options: boot.Options{Root: e.root, InstallCodex: func(ctx context.Context, root string) (string, error) {
		return installCodex(ctx, root, nil)
	}}, Logger: e.log}
	if *tableFile != "" {
		b, err := os.ReadFile(*tableFile)
		if err != nil {
			return fmt.Errorf("reading the program table: %w", err)
		}
		t, err := boot.ParseTable(b, *tableFile)
		if err != nil {
			return usageError("%w", err)
		}
		cfg.Table = &t
	}
	return boot.Run(ctx, cfg)
}
