package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newRestoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Restore a backup: directly when there is no box, else through a candidate box",
		Long: "restore verifies BACKUP and stages a read-only copy. Without a box it creates one in\n" +
			"restore mode and applies the backup. With a box it first takes a safety snapshot,\n" +
			"proves the backup on a candidate box on a random loopback port, then replaces the box,\n" +
			"rolling back from the safety snapshot if that fails.",
		Args: cobra.ExactArgs(1),
		RunE: restoreAction,
	}
}

func restoreAction(cmd *cobra.Command, args []string) error {
	src, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	if err := b.Restore(cmd.Context(), src); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s\n", b.Config().MachineName, src)
	return err
}
