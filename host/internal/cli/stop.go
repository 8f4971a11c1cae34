package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newStopCommand() *cobra.Command {
	return boxCommand(&cobra.Command{
		Use:   "stop",
		Short: "Stop the box's services gracefully, then the machine",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error { return box.Stop(cmd.Context(), b) })
}
