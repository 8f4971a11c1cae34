package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/backup"
)

func newRestoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Restore a backup: directly when there is no box, else through a candidate box",
		Long: "restore verifies BACKUP and stages a read-only copy. Without a box it creates one in\n" +
			"restore mode and applies the backup. With a box it first takes a safety snapshot,\n" +
			"proves the backup on a candidate box on a random loopback port, then replaces the box,\n" +
			"rolling back from the safety snapshot if that fails.",
		Args: cobra.ExactArgs(1),
		RunE: restoreAction,
	}
}

func restoreAction(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	src, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	env, err := loadBoxEnv(cmd)
	if err != nil {
		return err
	}
	env.resume = src
	return env.locked(ctx, func() error {
		staged, err := restorePreflight(ctx, env, src)
		if err != nil {
			return fmt.Errorf("restore preflight: %w", err)
		}
		defer func() {
			if err := staged.Remove(); err != nil {
				slog.Warn("removing the staged copy", "error", err)
			}
		}()
		r := &backup.Restore{Ops: env.ops(), Machine: env.cfg.MachineName, Port: env.cfg.SSHPort, StateDir: env.cfg.StateDir()}
		if err := r.Run(ctx, staged.Dir); err != nil {
			return err
		}
		// A restore of the safety snapshot an interrupted cut-over named
		// recovers the original: the journal has served.
		if safety, _ := backup.Interrupted(env.cfg.StateDir()); safety == src {
			if err := os.Remove(filepath.Join(env.cfg.StateDir(), backup.JournalFile)); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(env.stdout, "restored %s from %s\n", env.cfg.MachineName, src)
		return err
	})
}

// restorePreflight checks everything before anything is touched: the base
// artifact, the backup (staged), and the key fingerprint.
func restorePreflight(ctx context.Context, env *boxEnv, src string) (*backup.Staged, error) {
	base := env.app.baseArtifact()
	if fi, err := os.Stat(base); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("base artifact %s is required: %v", base, err)
	}
	staged, err := backup.Stage(ctx, src, env.cfg.StateDir())
	if err != nil {
		return nil, err
	}
	m := staged.Manifest
	switch {
	case m.Legacy():
		slog.Warn("legacy backup does not record its SSH key fingerprint", "backup", src)
	case m.Fingerprint != env.finger:
		_ = staged.Remove()
		return nil, fmt.Errorf("SSH key fingerprint mismatch: backup requires %s, supplied key is %s", m.Fingerprint, env.finger)
	}
	return staged, nil
}
