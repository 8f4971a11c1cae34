package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newDestroyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destroy --force",
		Short: "Delete the box and any builder; keep keys, images and backups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			force, _ := cmd.Flags().GetBool("force")
			if !force {
				return userr.Usage("destroy requires --force; images, backups and the SSH key are retained")
			}
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			deleted, err := b.Destroy(cmd.Context())
			if err != nil {
				return err
			}
			c := b.Config()
			if len(deleted) == 0 {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "nothing to destroy: there is no machine %s or %s\n", c.MachineName, c.BuilderName)
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s; kept %s, %s and the SSH key %s\n",
				strings.Join(deleted, " and "), c.ImagesDir(), c.BackupsDir(), c.SSHKeyPath())
			return err
		},
	}
	cmd.Flags().Bool("force", false, "really delete the machines")
	return cmd
}
