package cli

import (
	"github.com/spf13/cobra"
)

func newRestartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restart",
		Short: "Stop the box, then start and verify it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			return b.Restart(cmd.Context())
		},
	}
}
