package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newDestroyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destroy --force",
		Short: "Delete the box and any builder; keep keys, images and backups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			force, _ := cmd.Flags().GetBool("force")
			if !force {
				return errors.New("destroy requires --force; images, backups and the SSH key are retained")
			}
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			if err := b.Destroy(cmd.Context()); err != nil {
				return err
			}
			c := b.Config()
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s; kept %s, %s and the SSH key %s\n",
				c.MachineName, c.ImagesDir(), c.BackupsDir(), c.SSHKeyPath())
			return err
		},
	}
	cmd.Flags().Bool("force", false, "really delete the machines")
	return cmd
}
