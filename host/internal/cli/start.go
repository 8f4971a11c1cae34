package cli

import (
	"github.com/spf13/cobra"
)

func newStartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Start the box and verify it (loopback-only SSH, agent health)",
		Long: "start boots the box, waits for its SSH port, checks that every published port listens on\n" +
			"loopback only and that the agent reports healthy. If verification fails the box is stopped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			return b.Start(cmd.Context())
		},
	}
}
