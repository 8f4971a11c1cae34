package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newSnapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot [LABEL]",
		Short: "Back up the box (root file system and workspace), then resume it",
		Long: "snapshot stops the box's services, streams its root file system and workspace into\n" +
			"<backups>/<machine>-<time>-<label>.hermesbox (by default incremental: its chunks go into the\n" +
			"deduplicating store backups/.chunks, the directory holds its signed record; with\n" +
			"HERMES_BOX_SNAPSHOT_INCREMENTAL=false a self-contained hermes-box-v2 backup) and returns the box to\n" +
			"the state it was in. It prints the backup's path, and on stderr what it added to the disk and what it\n" +
			"restores to. To keep a copy off this machine: hermes-box backups export latest.",
		Args: cobra.MaximumNArgs(1),
		RunE: snapshotAction,
	}
}

func snapshotAction(cmd *cobra.Command, args []string) error {
	label := "manual"
	if len(args) == 1 {
		label = args[0]
		if err := box.CheckLabel(label); err != nil {
			return userr.WithCode(err, userr.ExitUsage)
		}
	}
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	dir, err := box.Snapshot(cmd.Context(), b, label)
	if err != nil {
		return err
	}
	reportSize(cmd, b, dir)
	if _, err := fmt.Fprintln(cmd.OutOrStdout(), dir); err != nil {
		return err
	}
	autoPrune(cmd, b)
	return nil
}

// autoPrune prunes the backups by the configuration's retention policy,
// when it has one; the backup is saved whatever happens, so a failure
// is a warning.
func autoPrune(cmd *cobra.Command, b *box.Box) {
	rep, err := box.AutoPrune(cmd.Context(), b)
	switch {
	case err != nil:
		renderer(cmd).Warn("the backup is saved, but pruning by HERMES_BOX_PRUNE_KEEP_* failed: %v", err)
	case rep != nil:
		renderer(cmd).Info("pruned by HERMES_BOX_PRUNE_KEEP_* (%s): %d kept, %d removed", rep.Policy, len(rep.Kept), len(rep.Removed))
		warnNotCollected(cmd, rep.NotCollected)
	}
}

// reportSize says, on stderr, what the backup in dir added to the disk
// and what it restores to (an incremental backup's directory is only its
// record: its data is in the chunk store).
func reportSize(cmd *cobra.Command, b *box.Box, dir string) {
	e, ok := box.DescribeBackup(cmd.Context(), b, dir)
	if !ok {
		return
	}
	renderer(cmd).Info("backup %s: %s", filepath.Base(dir), box.BackupSize(e))
}
