package box

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// RestoreOptions are restore's flags.
type RestoreOptions struct {
	// LegacyOK accepts an unsigned backup (--legacy-backup).
	LegacyOK bool
	// DiscardCurrent deletes the current box without a safety snapshot
	// (--discard-current), once the backup is verified and staged.
	DiscardCurrent bool
	// WorkspaceOnly applies the backup's workspace alone
	// (--workspace-only): the box's root file system is the current base
	// image's, with the Hermes and agent the last init built it with.
	WorkspaceOnly bool
}

// Restore restores the backup src (an absolute path): directly when there
// is no box, else through a candidate box. A backup not signed by this
// project's key is refused, an unsigned one (made before backups were
// signed) unless opts.LegacyOK vouches for it; opts.DiscardCurrent
// replaces an existing box without a safety snapshot.
func Restore(ctx context.Context, b *Box, src string, opts RestoreOptions) error {
	env, err := loadBackupRun(b)
	if errors.Is(err, userr.ErrNoBox) {
		return userr.WithHint(fmt.Errorf("restore needs the SSH key the backup was made with, and there is none at %s", b.cfg.SSHKeyPath()),
			"put the key pair there (a portable package carries it in state/), or set HERMES_BOX_SSH_KEY, then run the restore again")
	}
	if err != nil {
		return err
	}
	if backupset.IsExport(src) {
		if src, err = importExport(ctx, b, env, src, opts.LegacyOK); err != nil {
			return err
		}
	}
	env.resume = src
	return aftermath(ctx, b, "restore", restore(ctx, b, env, src, opts))
}

// importExport unpacks the export archive (`backups export`'s file, kept
// elsewhere) into the backups directory, verified against the project key
// before it is published (backupset.ImportExport), and returns the
// backup's path.
func importExport(ctx context.Context, b *Box, env *backupRun, archive string, legacyOK bool) (string, error) {
	var dir string
	err := withLock(b, func() error {
		var err error
		dir, err = backupset.ImportExport(ctx, archive, b.cfg.BackupsDir(), env.trust(legacyOK), env.limits())
		return err
	})
	if err != nil {
		return "", err
	}
	b.ui.Info("unpacked %s into %s", filepath.Base(archive), dir)
	return dir, nil
}

// restore is Restore under the lock.
func restore(ctx context.Context, b *Box, env *backupRun, src string, opts RestoreOptions) error {
	cfg := b.cfg
	return env.locked(ctx, func() error {
		if err := restoreHostChecks(ctx, b); err != nil {
			return err
		}
		resumeServices(ctx, b)
		staged, err := restorePreflight(ctx, env, src, opts.LegacyOK)
		if err != nil {
			return fmt.Errorf("restore preflight: %w", err)
		}
		defer func() {
			if err := staged.Remove(); err != nil {
				slog.Warn("removing the staged copy", "error", err)
			}
		}()
		if opts.WorkspaceOnly {
			env.workspaceOnly = staged.Dir
			b.ui.Warn("restoring the workspace of %s alone: the root file system is the current base image's (%s, with the Hermes and agent the last init built), "+
				"so what was installed outside %s is not carried", filepath.Base(src), BaseArtifact(b), boxlayout.Workspace)
		}
		// Recovering an interrupted cut-over: what stands under the box's
		// name is the half-made replacement; the original is in src.
		if safety, _ := backup.Interrupted(cfg.StateDir()); safety != "" && safety == src {
			b.ui.Warn("removing the half-made %s an interrupted restore left, then restoring the original from %s", cfg.MachineName, src)
			if err := removeMachine(ctx, b, cfg.MachineName); err != nil {
				return fmt.Errorf("removing the half-made %s: %w", cfg.MachineName, err)
			}
		}
		r := &backup.Restore{Ops: env.ops(), Machine: cfg.MachineName, Port: cfg.SSHPort, StateDir: cfg.StateDir(), DiscardCurrent: opts.DiscardCurrent}
		if err := r.Run(ctx, staged.Dir); err != nil {
			// A rollback may have started the original again.
			err = errors.Join(err, secretsAfterCutOver(ctx, b))
			if errors.Is(err, backup.ErrSafetySnapshot) {
				return userr.WithHint(err, "if the box is compromised, `hermes-box restore --discard-current "+src+
					"` restores without a safety snapshot: the current box is deleted once the backup is verified and staged")
			}
			return err
		}
		// The restored box holds the backup's content: its next
		// incremental snapshot is told of that backup's chunks alone.
		if err := chunkstore.NoteRestored(cfg.BackupsDir(), cfg.MachineName, boxIdentity(b), src, time.Now()); err != nil {
			slog.Warn("noting the restored backup for the next snapshot", "error", err)
		}
		// The box runs the Hermes its health check found: the backup's, or
		// the base image's for a workspace-only restore.
		if err := recordHermes(b, env.hermes); err != nil {
			slog.Warn("recording the restored box's Hermes", "error", err)
		}
		if env.hermes != "" {
			b.ui.Info("the restored box runs Hermes %s", env.hermes)
		}
		if err := installAuditAnchor(ctx, b, env.anchor); err != nil {
			return errors.Join(err, secretsAfterCutOver(ctx, b))
		}
		// A restore of the safety snapshot an interrupted cut-over named
		// recovers the original: the journal has served.
		if safety, _ := backup.Interrupted(cfg.StateDir()); safety == src {
			if err := os.Remove(filepath.Join(cfg.StateDir(), filenames.RestoreJournal)); err != nil {
				return err
			}
		}
		return secretsAfterCutOver(ctx, b)
	})
}

// restorePreflight checks everything before anything is touched: the base
// artifact, then the backup: its signature by the project key first, then
// the rest as it is staged.
func restorePreflight(ctx context.Context, env *backupRun, src string, legacyOK bool) (*backup.Staged, error) {
	base := BaseArtifact(env.box)
	if fi, err := os.Stat(base); err != nil || !fi.Mode().IsRegular() {
		return nil, userr.WithHint(fmt.Errorf("base artifact %s is required: %v", base, err),
			"copy images/ from the host the backup came from, or build it with `hermes-box init` (which creates a box the restore then replaces)")
	}
	staged, err := backupset.Stage(ctx, src, env.box.cfg.StateDir(), env.trust(legacyOK), env.limits(), env.signer)
	if err != nil {
		return nil, err
	}
	if line := staged.Manifest.AuditAnchor; line != "" {
		a, err := auditanchor.ParseLine(line)
		if err != nil {
			_ = staged.Remove()
			return nil, fmt.Errorf("%s: %s: %w", src, backup.FileManifest, err)
		}
		env.anchor = &a
	}
	env.sayOrigin(staged)
	return staged, nil
}

// sayOrigin tells who made the staged backup. A package brings its own
// key: its signature shows the backup unchanged since it was packaged, not
// who packaged it.
func (e *backupRun) sayOrigin(staged *backup.Staged) {
	ui := e.box.ui
	switch {
	case staged.Signer == nil:
		ui.Warn("restoring an unsigned backup, as --legacy-backup says: %s", backup.LegacySkips)
	case fromPackage(e.box):
		ui.Warn("this project came from a portable package, whose key (%s) signed the backup: that shows it unchanged since it was packaged, not who made it; restore only packages you made",
			keys.Fingerprint(staged.Signer))
	default:
		ui.Info("backup signed by this project's key %s", keys.Fingerprint(staged.Signer))
	}
}

// fromPackage reports a project unpacked from a portable package.
func fromPackage(b *Box) bool {
	fi, err := os.Lstat(filepath.Join(b.cfg.ProjectRoot, portableJSON))
	return err == nil && fi.Mode().IsRegular()
}

// NeedsRecovery reports an error that leaves the box for the next command
// to recover (an interrupted cut-over, a snapshot that could not restart
// the services): its message says how, even after Ctrl-C.
func NeedsRecovery(err error) bool {
	return errors.Is(err, backup.ErrInterrupted) || errors.Is(err, backup.ErrNotSettled)
}
