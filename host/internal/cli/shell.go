package cli

import (
	"github.com/spf13/cobra"
)

func newShellCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "Open the out-of-band root console (smolvm machine shell)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			return b.Shell(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}
