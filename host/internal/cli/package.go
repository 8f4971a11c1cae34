package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newPackageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "package [LABEL] | package --snapshot NAME|PATH [LABEL]",
		Short: "Write a portable restore archive (.tar + .sha256) of a new or existing backup",
		Long: "package writes <backups>/hermes-box-portable-<time>-<label>.tar and its .sha256: the\n" +
			"files needed to run hermes-box, the base artifact, the backup, and a generated\n" +
			"hermes-box.conf with the data dir and key cleared. It never replaces a file.",
		Args: cobra.MaximumNArgs(1),
		RunE: packageAction,
	}
	cmd.Flags().Bool("legacy-backup", false, "with --snapshot: accept an unsigned backup (made before backups were signed): its origin is not checked")
	cmd.Flags().String("snapshot", "", "package this existing backup (a name `hermes-box backups` prints, or a path) instead of taking a new one")
	_ = cmd.RegisterFlagCompletionFunc("snapshot", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return completeBackups(cmd, nil, "")
	})
	return cmd
}

func packageAction(cmd *cobra.Command, args []string) error {
	label := "portable"
	if len(args) == 1 {
		label = args[0]
		if err := box.CheckLabel(label); err != nil {
			return userr.WithCode(err, userr.ExitUsage)
		}
	}
	from, _ := cmd.Flags().GetString("snapshot")
	legacyOK, _ := cmd.Flags().GetBool("legacy-backup")
	if legacyOK && !cmd.Flags().Changed("snapshot") {
		return userr.WithCode(errors.New("--legacy-backup goes with --snapshot: a new snapshot is always signed"), userr.ExitUsage)
	}
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("snapshot") {
		// An empty name is a mistake, not a request for a new snapshot.
		if from, err = box.ResolveBackup(b, from); err != nil {
			return err
		}
	}
	archive, err := box.Package(cmd.Context(), b, label, from, legacyOK)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(archive); err == nil {
		renderer(cmd).Info("package %s: %s; it holds the project's SSH private key: keep it private", filepath.Base(archive), progress.Bytes(fi.Size()))
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), archive)
	return err
}
