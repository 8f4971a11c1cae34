package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func newLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs [-f] [-n N] [SERVICE]",
		Short: "Show or follow a service's log (default: the Hermes gateway)",
		Long: "logs prints the last lines of a service's log in the box (default: the Hermes gateway);\n" +
			"-f keeps following it until Ctrl-C (exit status 130). An unknown SERVICE is refused with the\n" +
			"list of the box's services.",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeServices,
		RunE: func(cmd *cobra.Command, args []string) error {
			lines, _ := cmd.Flags().GetInt("lines")
			follow, _ := cmd.Flags().GetBool("follow")
			if lines < 1 {
				return userr.Usage("--lines must be a positive number, got %d", lines)
			}
			service := boxlayout.HermesService
			if len(args) == 1 {
				service = args[0]
			}
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			names, err := box.Services(cmd.Context(), b)
			if err != nil {
				return err
			}
			if !slices.Contains(names, service) {
				return userr.WithCode(fmt.Errorf("unknown service %q: the box's services are %s", service, strings.Join(names, ", ")), userr.ExitUsage)
			}
			return box.Logs(cmd.Context(), b, cmd.OutOrStdout(), service, lines, follow)
		},
	}
	cmd.Flags().BoolP("follow", "f", false, "keep printing new lines until Ctrl-C")
	cmd.Flags().IntP("lines", "n", protocol.DefaultLogLines, "number of lines to show")
	return cmd
}

// completeServices completes the box's service names (when it runs).
func completeServices(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	b, err := loadBox(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := box.Services(cmd.Context(), b)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
