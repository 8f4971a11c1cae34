package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newShellCommand() *cobra.Command {
	return boxCommand(&cobra.Command{
		Use:   "shell",
		Short: "Open the out-of-band root console (smolvm machine shell)",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error {
		return box.Shell(cmd.Context(), b, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
}
