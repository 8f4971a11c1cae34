package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of hermes-box and what it pins",
		Args:  cobra.NoArgs,
		RunE:  versionAction,
	}
}

func versionAction(cmd *cobra.Command, _ []string) error {
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "hermes-box %s %s/%s protocol %d smolvm %s hermes %s\n",
		buildinfo.Version, runtime.GOOS, runtime.GOARCH, protocol.Version, pins.SmolvmTableVersions(), pins.DefaultHermesCommit)
	return err
}
