package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
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

// versionInfo is what `version --json` prints.
type versionInfo struct {
	Version  string   `json:"version"`
	OS       string   `json:"os"`
	Arch     string   `json:"arch"`
	Protocol int      `json:"protocol"`
	Smolvm   []string `json:"smolvm"` // the supported releases
	Hermes   string   `json:"hermes"`
}

func currentVersion() versionInfo {
	return versionInfo{Version: buildinfo.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Protocol: protocol.Version,
		Smolvm: strings.Split(pins.SmolvmTableVersions(), ","), Hermes: pins.DefaultHermesCommit}
}

// versionLine is the one-line version (`version`, `--version`).
func versionLine() string {
	v := currentVersion()
	return fmt.Sprintf("hermes-box %s %s/%s protocol %d smolvm %s hermes %s", v.Version, v.OS, v.Arch, v.Protocol, strings.Join(v.Smolvm, ","), v.Hermes)
}

func versionAction(cmd *cobra.Command, _ []string) error {
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return writeIndentedJSON(cmd.OutOrStdout(), currentVersion())
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
	return err
}
