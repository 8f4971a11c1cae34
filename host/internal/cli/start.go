package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newStartCommand() *cobra.Command {
	return boxCommand(&cobra.Command{
		Use:   "start",
		Short: "Start the box and verify it (loopback-only SSH, agent health)",
		Long: "start boots the box, waits for its SSH port, checks that every published port listens on\n" +
			"loopback only and that the agent reports healthy. If verification fails the box is stopped.",
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error { return box.Start(cmd.Context(), b) })
}
