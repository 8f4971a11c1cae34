package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newSSHCommand() *cobra.Command {
	cmd := boxCommand(&cobra.Command{
		Use:   "ssh [-- COMMAND...]",
		Short: "Log in to the box (tmux), or run COMMAND there; its exit status is passed on",
		Long: "ssh runs the system ssh client with the project key and the pinned host key in a private\n" +
			"known_hosts, forwarding of every kind off. The box is started first if it is stopped.",
	}, func(cmd *cobra.Command, b *box.Box, args []string) error {
		return box.SSH(cmd.Context(), b, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	// Everything after the first argument belongs to the remote command.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
