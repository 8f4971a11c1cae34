package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newSnapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot [LABEL]",
		Short: "Back up the box (root file system and workspace), then resume it",
		Long: "snapshot stops the box's services, streams its root file system and workspace into\n" +
			"<backups>/<machine>-<time>-<label>.hermesbox (hermes-box-v2), checksums them and\n" +
			"returns the box to the state it was in. It prints the backup's path.",
		Args: cobra.MaximumNArgs(1),
		RunE: snapshotAction,
	}
}

func snapshotAction(cmd *cobra.Command, args []string) error {
	label := "manual"
	if len(args) == 1 {
		label = args[0]
	}
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	dir, err := b.Snapshot(cmd.Context(), label)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), dir)
	return err
}
