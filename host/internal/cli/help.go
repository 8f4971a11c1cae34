package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// newHelpCommand is `hermes-box help [COMMAND…]`: cobra's own prints
// "Unknown help topic" and exits 0, so a script's typo passed; here an
// unknown topic is a usage error (exit 2).
func newHelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help prints the help of a command (hermes-box help snapshot) or of a topic (hermes-box help exit-codes).",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			var names []string
			for _, sub := range c.Root().Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return userr.Usage("there is no help topic %q: hermes-box --help lists the commands and topics", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
