package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newRestartCommand() *cobra.Command {
	return boxCommand(&cobra.Command{
		Use:   "restart",
		Short: "Stop the box, then start and verify it",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error { return box.Restart(cmd.Context(), b) })
}
