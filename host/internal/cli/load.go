package cli

import (
	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

// loadBox loads the project's configuration and builds its box, rendering
// progress on the command's stderr in the --log-format.
func loadBox(cmd *cobra.Command) (*box.Box, error) {
	format, _ := cmd.Flags().GetString("log-format")
	return box.Load(newProgress(cmd.ErrOrStderr(), format))
}
