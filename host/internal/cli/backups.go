package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
)

func newBackupsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backups",
		Aliases: []string{"backup"},
		Short:   "List the backups: label, time, size, machine, verified state",
		Long: "backups lists the backups in the backups directory, oldest first. Without --verify a backup is\n" +
			"\"complete\" when its files and manifest are present; with --verify its signature is checked against\n" +
			"the project key, every checksum is read, and it is \"verified\", \"unsigned\" (made before backups were\n" +
			"signed; restore needs --legacy-backup) or \"invalid\" (with the reason).",
		Args: cobra.NoArgs,
		RunE: backupsAction,
	}
	cmd.Flags().Bool("json", false, "print the list as JSON")
	cmd.Flags().Bool("verify", false, "verify every backup fully (reads every byte)")
	cmd.AddCommand(newBackupsDeleteCommand())
	return cmd
}

func backupsAction(cmd *cobra.Command, _ []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	deep, _ := cmd.Flags().GetBool("verify")
	entries, err := b.Backups(cmd.Context(), deep)
	if err != nil {
		return err
	}
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		return writeIndentedJSON(cmd.OutOrStdout(), entries)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "no backups in %s (hermes-box snapshot takes one)\n", b.Config().BackupsDir())
		return err
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLABEL\tCREATED\tSIZE\tMACHINE\tSTATE")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Label, created, progress.Bytes(e.Size), e.Machine, state)
	}
	return tw.Flush()
}

func newBackupsDeleteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a backup (never the last good one of a machine without --force)",
		Args:    cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			b, err := loadBox(cmd)
			if err != nil || len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			entries, _ := b.Backups(cmd.Context(), false)
			names := make([]string, len(entries))
			for i, e := range entries {
				names[i] = e.Name
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			force, _ := cmd.Flags().GetBool("force")
			var e box.BackupEntry
			err = b.Locked(func() error {
				var derr error
				e, derr = b.DeleteBackup(cmd.Context(), args[0], force)
				return derr
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted %s (%s)\n", e.Path, progress.Bytes(e.Size))
			return err
		},
	}
	cmd.Flags().Bool("force", false, "delete even the last good backup of its machine")
	return cmd
}
