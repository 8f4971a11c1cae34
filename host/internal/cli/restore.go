package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

// completeBackups completes the names `hermes-box backups` prints.
func completeBackups(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	b, err := loadBox(cmd)
	if err != nil || len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return box.BackupNames(cmd.Context(), b.Config().BackupsDir()), cobra.ShellCompDirectiveNoFileComp
}

func newRestoreCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore NAME|PATH",
		Short: "Restore a backup: directly when there is no box, else through a candidate box",
		Long: "restore takes a backup by the name `hermes-box backups` prints (or its path), verifies it and stages a read-only copy. Without a box it creates one in\n" +
			"restore mode and applies the backup. With a box it first takes a safety snapshot,\n" +
			"proves the backup on a candidate box on a random loopback port, then replaces the box,\n" +
			"rolling back from the safety snapshot if that fails. A backup whose manifest does not\n" +
			"record this project's SSH key fingerprint is refused: --legacy-backup restores one made\n" +
			"before fingerprints were recorded (never one recording another key).",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBackups,
		RunE:              restoreAction,
	}
	cmd.Flags().Bool("legacy-backup", false, "accept a backup without ssh_key_fingerprint (made before fingerprints were recorded)")
	return cmd
}

func restoreAction(cmd *cobra.Command, args []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	src, err := b.ResolveBackup(args[0])
	if err != nil {
		return err
	}
	legacyOK, _ := cmd.Flags().GetBool("legacy-backup")
	if err := b.Restore(cmd.Context(), src, legacyOK); err != nil {
		return err
	}
	if left := b.SafetySnapshots(cmd.Context()); left != "" {
		renderer(cmd).Info("%s", left)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s\n", b.Config().MachineName, src)
	return err
}
