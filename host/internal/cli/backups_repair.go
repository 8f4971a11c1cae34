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
			"chunks are all held are whole; the others are named (exit status 1). If the rebuilt index would lack\n" +
			"chunks that backups need, it names them, changes nothing and exits 1; --force rebuilds anyway. Chunks\n" +
			"found corrupt and set aside (by backups --verify, --read-data or a restore) stay so: the backups that\n" +
			"need them are named, and the next snapshot stores them again when the box still has their files. It\n" +
			"holds the operation lock.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			force, _ := cmd.Flags().GetBool("force")
			reps, err := box.RepairBackups(cmd.Context(), b, force)
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
			if err := refusedRepair(reps); err != nil {
				return err
			}
			return brokenBackups(reps)
		},
	}
	cmd.Flags().Bool("json", false, "print the report as JSON")
	cmd.Flags().Bool("force", false, "rebuild the index even when backups would lack chunks in it")
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
		printLosses(w, r)
	}
	return nil
}

// printLosses says what backups lack in r's rebuilt index, names as text.
func printLosses(w io.Writer, r backupset.Repaired) {
	verb := "lacks"
	if r.Refused {
		verb = "would lack"
	}
	for _, l := range r.Losses {
		if l.Tree {
			fmt.Fprintf(w, "  %s %s %d chunks of its %s tree: the whole part\n", termsafe.String(l.Backup), verb, l.Chunks, l.Part)
			continue
		}
		aside := ""
		if l.SetAside > 0 {
			aside = fmt.Sprintf(" (%d found corrupt and set aside)", l.SetAside)
		}
		fmt.Fprintf(w, "  %s %s %d chunks%s of %d files of its %s:\n", termsafe.String(l.Backup), verb, l.Chunks, aside, len(l.Files)+l.MoreFiles, l.Part)
		for _, f := range l.Files {
			fmt.Fprintf(w, "    %s\n", termsafe.String(f))
		}
		if l.MoreFiles > 0 {
			fmt.Fprintf(w, "    and %d more\n", l.MoreFiles)
		}
	}
	if r.Refused {
		fmt.Fprintf(w, "  %s: index left as it was\n", r.Machine)
	}
}

// refusedRepair is the error of a repair that left stores as they were
// because backups would lack chunks.
func refusedRepair(reps []backupset.Repaired) error {
	var refused []string
	for _, r := range reps {
		if r.Refused {
			refused = append(refused, r.Machine)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return userr.WithHint(fmt.Errorf("not repaired: the rebuilt index of %s would lack chunks that backups need (named above); nothing was changed", strings.Join(refused, ", ")),
		"hermes-box backups repair --force rebuilds it anyway; those backups stay broken")
}

// damagedHint is what recovers backups whose chunks were found corrupt
// and set aside.
const damagedHint = "take a snapshot (hermes-box snapshot): the box still has the content of the damaged files named above " +
	"unless they changed since, and the snapshot stores it again; hermes-box backups --verify then checks them. " +
	"Otherwise restore an older backup that verifies, or delete the damaged ones with hermes-box backups delete NAME"

// brokenBackups is the error of a repair that left backups broken.
func brokenBackups(reps []backupset.Repaired) error {
	var bad, damaged []string
	for _, r := range reps {
		for _, e := range r.Broken {
			bad = append(bad, termsafe.String(e.Name))
			if backupset.Damaged(e) {
				damaged = append(damaged, termsafe.String(e.Name))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if len(damaged) > 0 {
		return userr.WithHint(fmt.Errorf("%d incremental backups are not whole: %s; corrupt chunks were found and set aside in %s", len(bad), strings.Join(bad, ", "), strings.Join(damaged, ", ")),
			damagedHint)
	}
	return userr.WithHint(fmt.Errorf("%d incremental backups are not whole: %s", len(bad), strings.Join(bad, ", ")),
		"their chunks are gone from the store; delete them with hermes-box backups delete NAME")
}
