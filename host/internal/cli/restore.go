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
	return box.BackupNames(cmd.Context(), b), cobra.ShellCompDirectiveNoFileComp
}

func newRestoreCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore NAME|PATH|LABEL|latest|EXPORT.tar",
		Short: "Restore a backup: directly when there is no box, else through a candidate box",
		Long: "restore takes a backup by the name `hermes-box backups` prints (or its path, or its label: the newest\n" +
			"good backup of the box with that label; latest: the newest that is not a safety snapshot; or the path of\n" +
			"a file `hermes-box backups export` wrote, kept elsewhere: its .sha256 beside it is checked, and it is\n" +
			"unpacked into the backups directory once it verifies), verifies it and stages a read-only copy. A copy\n" +
			"of an incremental backup's directory alone does not restore (its data is in backups/.chunks): export\n" +
			"it. Without a box it creates one in\n" +
			"restore mode and applies the backup. With a box it first takes a safety snapshot,\n" +
			"proves the backup on a candidate box on a random loopback port, then replaces the box,\n" +
			"rolling back from the safety snapshot if that fails. Before anything else, the backup's\n" +
			"SSH signature (SHA256SUMS.sig) must verify with this project's key: one signed by another key\n" +
			"is refused; --legacy-backup restores an unsigned one, made before backups were signed\n" +
			"(never one recording another key's fingerprint).\n\n" +
			"--workspace-only applies the backup's workspace alone onto the current base image (what the last\n" +
			"`hermes-box init` built, with the configured Hermes and this hermes-box's agent): the way to move a box\n" +
			"to a newer Hermes or hermes-box and keep its workspace (docs/backups.md, \"Upgrading\"). What was\n" +
			"installed outside /workspace is not carried.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBackups,
		RunE:              restoreAction,
	}
	cmd.Flags().Bool("legacy-backup", false, "accept an unsigned backup (made before backups were signed): its origin is not checked")
	cmd.Flags().Bool("workspace-only", false, "apply the backup's workspace alone: the root file system is the current base image's (an upgrade; what was installed outside /workspace is not carried)")
	cmd.Flags().Bool("discard-current", false, "no safety snapshot: delete the current box once the backup is verified and staged (the way back from a compromised box)")
	return cmd
}

func restoreAction(cmd *cobra.Command, args []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	src, err := box.ResolveBackupIn(cmd.Context(), b, args[0])
	if err != nil {
		return err
	}
	var opts box.RestoreOptions
	opts.LegacyOK, _ = cmd.Flags().GetBool("legacy-backup")
	opts.DiscardCurrent, _ = cmd.Flags().GetBool("discard-current")
	opts.WorkspaceOnly, _ = cmd.Flags().GetBool("workspace-only")
	if err := box.Restore(cmd.Context(), b, src, opts); err != nil {
		return err
	}
	if left := box.SafetySnapshots(cmd.Context(), b); left != "" {
		renderer(cmd).Info("%s", left)
	}
	what := b.Config().MachineName
	if opts.WorkspaceOnly {
		what = "the workspace of " + what
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s\n", what, src)
	return err
}
