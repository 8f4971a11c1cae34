package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

func newBackupsRepairCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Rebuild the chunk stores' indexes from their packs, and say which incremental backups are whole",
		Long: "repair rebuilds the index of every machine's chunk store (backups/.chunks/MACHINE) from the headers of\n" +
			"its packs: a deleted or damaged index is recovered from the data it describes. A pack whose header is\n" +
			"damaged is left out and named. Then every incremental backup is checked against the store: those whose\n" +
			"chunks are all held are whole; the others are named (exit status 1). It holds the operation lock.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			reps, err := box.RepairBackups(cmd.Context(), b)
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				err = writeIndentedJSON(cmd.OutOrStdout(), reps)
			} else {
				err = printRepair(cmd.OutOrStdout(), reps)
			}
			if err != nil {
				return err
			}
			return brokenBackups(reps)
		},
	}
	cmd.Flags().Bool("json", false, "print the report as JSON")
	return cmd
}

func printRepair(w io.Writer, reps []backupset.Repaired) error {
	if len(reps) == 0 {
		_, err := fmt.Fprintln(w, "no chunk store to repair (no incremental backups)")
		return err
	}
	// Every line may carry what a box chose (a tree's entry names in a
	// problem): each field is made one safe line.
	for _, r := range reps {
		fmt.Fprintf(w, "%s: index rebuilt from %d packs, %d chunks; %d incremental backups whole\n", termsafe.String(r.Machine), r.Packs, r.Chunks, len(r.Whole))
		for _, u := range r.Unreadable {
			fmt.Fprintf(w, "  left out a damaged pack: %s\n", termsafe.String(u))
		}
		for _, e := range r.Broken {
			fmt.Fprintf(w, "  broken: %s: %s\n", termsafe.String(e.Name), termsafe.String(e.Problem))
		}
	}
	return nil
}

// brokenBackups is the error of a repair that left backups broken.
func brokenBackups(reps []backupset.Repaired) error {
	var bad []string
	for _, r := range reps {
		for _, e := range r.Broken {
			bad = append(bad, termsafe.String(e.Name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return userr.WithHint(fmt.Errorf("%d incremental backups are not whole: %s", len(bad), strings.Join(bad, ", ")),
		"their chunks are gone from the store; delete them with hermes-box backups delete NAME")
}
