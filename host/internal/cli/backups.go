package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

func newBackupsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backups",
		Aliases: []string{"backup"},
		Short:   "List the backups: label, time, size, what each added, machine, verified state",
		Long: "backups lists the backups in the backups directory, oldest first. Without --verify a backup is\n" +
			"\"complete\" when its files and manifest (an incremental backup: its signed record) are present; with\n" +
			"--verify its signature is checked against the project key, every checksum is read (an incremental\n" +
			"backup: every chunk it names is held, and a random sample of them re-hashed: the whole store up to\n" +
			"256 MiB, else one chunk in 32, at most 1 GiB a run), and it is \"verified\", \"unsigned\" (made before\n" +
			"backups were signed; restore needs --legacy-backup) or \"invalid\" (with the reason); --read-data reads\n" +
			"and re-hashes every chunk. A chunk found corrupt is set aside (so --verify and --read-data take the\n" +
			"operation lock, as a snapshot does), and the next snapshot stores it again when the box still has\n" +
			"its file. RESTORES TO is the backup's own size (an incremental backup: the bytes\n" +
			"of its parts, as an export writes them), ADDED what it added to the disk when it was taken (an\n" +
			"incremental backup: the new chunks it stored). After the table: the exports and packages hermes-box\n" +
			"wrote into the backups directory, and what the directory holds on disk in all (chunk stores, v2\n" +
			"backups, incremental records, exports and packages).",
		Args: cobra.NoArgs,
		RunE: backupsAction,
	}
	cmd.Flags().Bool("json", false, "print the list as JSON")
	cmd.Flags().Bool("verify", false, "verify every backup fully (reads every byte; every chunk of an incremental backup held, a sample re-hashed)")
	cmd.Flags().Bool("read-data", false, "verify, and read and re-hash every chunk of the incremental backups")
	cmd.AddCommand(newBackupsDeleteCommand(), newBackupsPruneCommand(), newBackupsRepairCommand(), newBackupsExportCommand())
	return cmd
}

func backupsAction(cmd *cobra.Command, _ []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	deep, _ := cmd.Flags().GetBool("verify")
	readData, _ := cmd.Flags().GetBool("read-data")
	entries, err := box.ListBackups(cmd.Context(), b, deep, readData)
	if err != nil {
		return err
	}
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		err = writeIndentedJSON(cmd.OutOrStdout(), entries)
	} else {
		err = printBackups(cmd.OutOrStdout(), b.Config().BackupsDir(), entries)
		if err == nil {
			err = printUsage(cmd.OutOrStdout(), b)
		}
	}
	if err != nil {
		return err
	}
	return invalidBackups(entries)
}

// invalidBackups is the error of a listing with invalid backups (exit
// status 1): a script's `backups --verify` fails when one is.
func invalidBackups(entries []box.BackupEntry) error {
	var bad, damaged []string
	for _, e := range entries {
		if !e.Good() {
			bad = append(bad, e.Name)
		}
		if backupset.Damaged(e) {
			damaged = append(damaged, termsafe.String(e.Name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if len(damaged) > 0 {
		return userr.WithHint(fmt.Errorf("%d of %d backups are invalid: %s; corrupt chunks were found and set aside in %s", len(bad), len(entries), strings.Join(bad, ", "), strings.Join(damaged, ", ")),
			damagedHint)
	}
	return userr.WithHint(fmt.Errorf("%d of %d backups are invalid: %s", len(bad), len(entries), strings.Join(bad, ", ")),
		"the listing says why; delete one with hermes-box backups delete NAME (a copy kept elsewhere can replace it)")
}

// printBackups is the table of backups.
func printBackups(w io.Writer, dir string, entries []box.BackupEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(w, "no backups in %s (hermes-box snapshot takes one)\n", dir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLABEL\tCREATED\tRESTORES TO\tADDED\tMACHINE\tSTATE")
	for _, e := range entries {
		created := "-"
		if !e.Created.IsZero() {
			created = e.Created.Local().Format(time.DateTime)
		}
		state := e.Verified
		if e.Unsigned && e.Verified == box.BackupComplete {
			state += ", unsigned"
		}
		if e.Problem != "" {
			state += ": " + e.Problem
		}
		if e.Incremental {
			state = "incremental, " + state
		}
		// Every cell may carry what a box chose (a tree's entry names in
		// a problem, a label): each is made one safe line.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(e.Name), termsafe.String(e.Label), created,
			progress.Bytes(e.Size), progress.Bytes(e.Added), termsafe.String(e.Machine), termsafe.String(state))
	}
	return tw.Flush()
}

// printUsage lists the exports and packages in the backups directory and
// says what the directory holds on disk in all.
func printUsage(w io.Writer, b *box.Box) error {
	u, err := box.BackupsUsage(b)
	if err != nil {
		return err
	}
	if len(u.Files) > 0 {
		fmt.Fprintln(w, "exports and packages (each with its .sha256):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range u.Files {
			fmt.Fprintf(tw, "  %s\t%s\n", termsafe.String(f.Name), progress.Bytes(f.Size))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "on disk: %s in all: chunk stores %s, v2 backups %s, incremental records %s, exports and packages %s\n",
		progress.Bytes(u.Total()), progress.Bytes(u.Stores), progress.Bytes(u.V2), progress.Bytes(u.Records), progress.Bytes(u.FilesBytes))
	return err
}

func newBackupsDeleteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete NAME",
		Aliases:           []string{"rm"},
		Short:             "Delete a backup (never the last good one of a machine without --force)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBackups,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			force, _ := cmd.Flags().GetBool("force")
			var d backupset.Deleted
			err = box.Locked(b, func() error {
				var derr error
				d, derr = box.DeleteBackup(cmd.Context(), b, args[0], force)
				return derr
			})
			if err != nil {
				return err
			}
			freed := d.Size
			if d.Incremental {
				freed = 0
				if d.Collected != nil {
					freed = d.Collected.BytesFreed
				}
			}
			warnNotCollected(cmd, d.NotCollected)
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted %s (%s freed)\n", termsafe.String(d.Path), progress.Bytes(freed))
			return err
		},
	}
	cmd.Flags().Bool("force", false, "delete even the last good backup of its machine")
	return cmd
}
