package cli

import (
	"github.com/spf13/cobra"
)

func newStopCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the box's services gracefully, then the machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			return b.Stop(cmd.Context())
		},
	}
}
