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
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			if _, err := a.machineState(cmd.Context(), a.cfg.MachineName); err != nil {
				return err
			}
			code, err := a.vm.Shell(cmd.Context(), a.cfg.MachineName, a.stdin, a.stdout, a.stderr)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitStatus(code)
			}
			return nil
		},
	}
}
