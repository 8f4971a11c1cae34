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
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			return a.withLock(func() error {
				if err := a.stopBox(cmd.Context()); err != nil {
					return err
				}
				return a.startBox(cmd.Context())
			})
		},
	}
}
