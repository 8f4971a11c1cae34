package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
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
	reportSize(cmd, dir)
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

// reportSize says how big the backup in dir is, on stderr.
func reportSize(cmd *cobra.Command, dir string) {
	var n int64
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
		}
	}
	renderer(cmd).Info("backup %s: %s", filepath.Base(dir), progress.Bytes(n))
}
