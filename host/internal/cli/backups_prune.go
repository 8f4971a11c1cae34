package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newBackupsPruneCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prune --keep-last N --keep-daily D --keep-weekly W [--dry-run]",
		Short: "Remove the box's backups a retention policy does not keep, then the chunks no backup needs",
		Long: "prune applies a retention policy to this box's machine's backups, v2 and incremental alike, as restic's\n" +
			"forget does: it keeps the N newest, the newest of each of the D most recent days with a backup and of\n" +
			"each of the W most recent weeks (Monday to Sunday, local time) with one; a backup any rule keeps is kept.\n" +
			"The newest backup must pass the full verification and is always kept (a newer one that fails is left\n" +
			"alone, as every invalid backup is: `backups delete` removes those). Each backup removed is first renamed\n" +
			"out of the listing, then deleted; then the machine's chunk store drops the chunks no backup left needs\n" +
			"(mark, sweep, repack sparse packs). It holds the operation lock. --dry-run says what it would remove.",
		Args: cobra.NoArgs,
		RunE: backupsPruneAction,
	}
	cmd.Flags().Int("keep-last", 0, "keep the N newest backups")
	cmd.Flags().Int("keep-daily", 0, "keep the newest backup of each of the D most recent days that have one")
	cmd.Flags().Int("keep-weekly", 0, "keep the newest backup of each of the W most recent weeks that have one")
	cmd.Flags().Bool("dry-run", false, "say what would be removed; change nothing")
	cmd.Flags().Bool("json", false, "print the report as JSON")
	return cmd
}

func backupsPruneAction(cmd *cobra.Command, _ []string) error {
	var p backupset.Policy
	p.Last, _ = cmd.Flags().GetInt("keep-last")
	p.Daily, _ = cmd.Flags().GetInt("keep-daily")
	p.Weekly, _ = cmd.Flags().GetInt("keep-weekly")
	if err := p.Check(); err != nil {
		return userr.WithCode(err, userr.ExitUsage)
	}
	dry, _ := cmd.Flags().GetBool("dry-run")
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	rep, err := box.PruneBackups(cmd.Context(), b, p, dry)
	if rep != nil {
		if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
			if jerr := writeIndentedJSON(cmd.OutOrStdout(), rep); err == nil {
				err = jerr
			}
		} else if perr := printPrune(cmd.OutOrStdout(), rep); err == nil {
			err = perr
		}
		warnNotCollected(cmd, rep.NotCollected)
	}
	return err
}

// warnNotCollected says why the chunk store was left uncollected, if it was.
func warnNotCollected(cmd *cobra.Command, why string) {
	if why != "" {
		renderer(cmd).Warn("the chunk store was not collected: %s", why)
	}
}

// printPrune says what a prune kept, removed and collected, and what it
// freed: a dry run's figure is worked out as the prune does it.
func printPrune(w io.Writer, rep *backupset.PruneReport) error {
	remove, removed, freed := "removed", "removed", "freed"
	if rep.DryRun {
		remove, removed, freed = "would remove", "would be removed", "would be freed"
	}
	fmt.Fprintf(w, "%s (%s):\n", rep.Machine, rep.Policy)
	for _, k := range rep.Kept {
		fmt.Fprintf(w, "  keep          %s (%s)\n", k.Name, strings.Join(k.Reasons, ", "))
	}
	for _, e := range rep.Removed {
		fmt.Fprintf(w, "  %-13s %s (%s)\n", remove, e.Name, box.BackupSize(e))
	}
	for _, e := range rep.Invalid {
		fmt.Fprintf(w, "  left invalid  %s: %s\n", e.Name, e.Problem)
	}
	for _, p := range rep.Reaped {
		fmt.Fprintf(w, "  removed %s, which an interrupted prune left\n", p)
	}
	if c := rep.Collected; c != nil {
		fmt.Fprintf(w, "chunk store: %d chunks %s, %d packs %s, %d repacked, %s %s\n",
			c.ChunksRemoved, removed, c.PacksRemoved, removed, c.PacksRepacked, progress.Bytes(c.BytesFreed), freed)
	}
	_, err := fmt.Fprintf(w, "%d kept, %d %s, %s %s\n", len(rep.Kept), len(rep.Removed), remove, progress.Bytes(rep.Freed), freed)
	return err
}
