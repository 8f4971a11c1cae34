package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
)

func newBackupsExportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "export NAME",
		Short: "Write a backup as one file that restores on another host",
		Long: "export writes backups/hermes-box-export-<name>.tar and its .sha256: the backup NAME as one v2 backup\n" +
			"directory, signed by the project key. An incremental backup is rebuilt from the chunk store, every chunk\n" +
			"re-hashed; either is verified before it is written. On the other host (with this project's key):\n" +
			"  sha256sum -c hermes-box-export-<name>.tar.sha256 && tar -xf hermes-box-export-<name>.tar -C <data dir>/backups\n" +
			"  hermes-box restore <name>\n" +
			"It never replaces a file.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBackups,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			src, err := box.ResolveBackup(b, args[0])
			if err != nil {
				return err
			}
			archive, err := box.ExportBackup(cmd.Context(), b, src)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(archive); err == nil {
				renderer(cmd).Info("export %s: %s", filepath.Base(archive), progress.Bytes(fi.Size()))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), archive)
			return err
		},
	}
}
