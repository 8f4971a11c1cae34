package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// defaultLogService is the Hermes gateway's service name in the box.
const defaultLogService = "hermes"

func newLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs [-f] [-n N] [SERVICE]",
		Short: "Show or follow a service's log (default: the Hermes gateway)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lines, _ := cmd.Flags().GetInt("lines")
			follow, _ := cmd.Flags().GetBool("follow")
			if lines < 1 {
				return fmt.Errorf("--lines must be a positive number, got %d", lines)
			}
			service := defaultLogService
			if len(args) == 1 {
				service = args[0]
			}
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			return b.Logs(cmd.Context(), cmd.OutOrStdout(), service, lines, follow)
		},
	}
	cmd.Flags().BoolP("follow", "f", false, "keep printing new lines")
	cmd.Flags().IntP("lines", "n", 200, "number of lines to show")
	return cmd
}
