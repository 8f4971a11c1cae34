package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

func newVersionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of hermes-box and what it pins",
		Args:  cobra.NoArgs,
		RunE:  versionAction,
	}
	cmd.Flags().Bool("json", false, "print the version as JSON")
	return cmd
}

func versionAction(cmd *cobra.Command, _ []string) error {
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return writeIndentedJSON(cmd.OutOrStdout(), box.CurrentVersion())
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), box.VersionLine())
	return err
}
