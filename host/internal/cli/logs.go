package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
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
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			m, err := a.machineState(cmd.Context(), a.cfg.MachineName)
			if err != nil {
				return err
			}
			if m.State != smolvm.StateRunning {
				return fmt.Errorf("%s is %s; start it with hermes-box start", m.Name, m.State)
			}
			tr, err := a.sshRelay()
			if err != nil {
				return err
			}
			argv := []string{"logs", service, "-n", strconv.Itoa(lines)}
			if follow {
				argv = append(argv, "-f")
			}
			return a.agent(cmd.Context(), tr, nil, a.stdout, argv...)
		},
	}
	cmd.Flags().BoolP("follow", "f", false, "keep printing new lines")
	cmd.Flags().IntP("lines", "n", 200, "number of lines to show")
	return cmd
}
