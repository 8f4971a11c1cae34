package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

// loadBox loads the project's configuration and builds its box, rendering
// progress on the command's stderr in the --log-format.
func loadBox(cmd *cobra.Command) (*box.Box, error) {
	return box.Load(renderer(cmd))
}

// boxCommand sets cmd's action: load the box, then run.
func boxCommand(cmd *cobra.Command, run func(cmd *cobra.Command, b *box.Box, args []string) error) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		b, err := loadBox(cmd)
		if err != nil {
			return err
		}
		return run(cmd, b, args)
	}
	return cmd
}
