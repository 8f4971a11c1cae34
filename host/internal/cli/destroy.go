package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/keys"
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
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			return a.withLock(func() error { return a.destroy(cmd.Context()) })
		},
	}
	cmd.Flags().Bool("force", false, "really delete the machines")
	return cmd
}

// destroy stops and deletes the box and the builder, then forgets the
// box's pinned host key.
func (a *app) destroy(ctx context.Context) error {
	for _, name := range []string{a.cfg.MachineName, a.cfg.BuilderName} {
		exists, err := a.vm.Exists(ctx, name)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		if name == a.cfg.MachineName {
			if err := a.stopBox(ctx); err != nil {
				a.ui.Warn("stopping %s: %v; deleting it anyway", name, err)
			}
		}
		done := a.ui.Step("delete", name)
		err = a.vm.Delete(ctx, name, true)
		done(err)
		if err != nil {
			return err
		}
	}
	if err := keys.RemoveHostKey(a.cfg.StateDir(), a.cfg.MachineName); err != nil {
		return err
	}
	if err := os.Remove(a.knownHostsPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", a.knownHostsPath(), err)
	}
	fmt.Fprintf(a.stdout, "destroyed %s; kept %s, %s and the SSH key %s\n",
		a.cfg.MachineName, a.cfg.ImagesDir(), a.cfg.BackupsDir(), a.cfg.SSHKeyPath())
	return nil
}

// knownHostsPath is the known_hosts file hermes-box writes for ssh.
func (a *app) knownHostsPath() string {
	return filepath.Join(a.cfg.StateDir(), "known_hosts")
}
