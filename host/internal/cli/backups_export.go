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
		Use:   "export NAME|LABEL|latest",
		Short: "Write a backup as one self-contained file: the way to keep a copy off this machine",
		Long: "export writes backups/hermes-box-export-<name>.tar and its .sha256: the backup NAME (or the newest with\n" +
			"LABEL, or latest) as one v2 backup directory, signed by the project key. An incremental backup's own\n" +
			"directory holds only its record (its data is in backups/.chunks), so a copy of that directory restores\n" +
			"nowhere: export it instead. An incremental backup is rebuilt from the chunk store, every chunk re-hashed;\n" +
			"either is verified before it is written. Keep the file, its .sha256 and the project key pair\n" +
			"(state/hermes-box-ed25519*) elsewhere; on this or another host, with that key in state/ and the base\n" +
			"image in images/ (or after hermes-box init):\n" +
			"  hermes-box restore /path/to/hermes-box-export-<name>.tar\n" +
			"checks the .sha256 beside it, unpacks it into backups/ once it verifies, and restores it.\n" +
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
