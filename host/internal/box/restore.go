package box

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/health"
)

// Snapshot backs the box up under label and returns the backup's path; the
// box is returned to the state it was in.
func Snapshot(ctx context.Context, b *Box, label string) (string, error) {
	if err := requireMachine(ctx, b); err != nil {
		return "", err
	}
	env, err := loadBackupRun(b)
	if err != nil {
		return "", err
	}
	var dir string
	err = env.locked(ctx, func() error {
		recordAuditHead(ctx, b)
		dir, err = env.snapshot(ctx, label, false)
		return err
	})
	return dir, aftermath(ctx, b, "snapshot", err)
}

// recordAuditHead records the audit chain's head before a snapshot of a
// running box, and warns when the log no longer extends the last one.
func recordAuditHead(ctx context.Context, b *Box) {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil || m.State != smolvm.StateRunning {
		return
	}
	tr, err := sshRelay(b)
	if err != nil {
		return
	}
	if c := anchorAudit(ctx, b, tr, time.Now().UTC()); c.Status != health.StatusHealthy {
		b.ui.Warn("%s", c.Message)
	}
}

// RestoreOptions are restore's flags.
type RestoreOptions struct {
	// LegacyOK accepts an unsigned backup (--legacy-backup).
	LegacyOK bool
	// DiscardCurrent deletes the current box without a safety snapshot
	// (--discard-current), once the backup is verified and staged.
	DiscardCurrent bool
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
	env.resume = src
	return aftermath(ctx, b, "restore", restore(ctx, b, env, src, opts))
}

// restore is Restore under the lock.
func restore(ctx context.Context, b *Box, env *backupRun, src string, opts RestoreOptions) error {
	cfg := b.cfg
	return env.locked(ctx, func() error {
		if err := restoreHostChecks(ctx, b); err != nil {
			return err
		}
		staged, err := restorePreflight(ctx, env, src, opts.LegacyOK)
		if err != nil {
			return fmt.Errorf("restore preflight: %w", err)
		}
		defer func() {
			if err := staged.Remove(); err != nil {
				slog.Warn("removing the staged copy", "error", err)
			}
		}()
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
		return nil, fmt.Errorf("base artifact %s is required: %v", base, err)
	}
	staged, err := backup.Stage(ctx, src, env.box.cfg.StateDir(), env.trust(legacyOK), env.limits())
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

// Package writes a portable restore archive of the backup from, or of a
// new snapshot labelled label when from is empty, and returns its path.
// legacyOK accepts an unsigned backup (made before backups were signed),
// saying what that skips; the package's restore then needs it too.
func Package(ctx context.Context, b *Box, label, from string, legacyOK bool) (string, error) {
	if from == "" {
		if err := requireMachine(ctx, b); err != nil {
			return "", err
		}
	}
	env, err := loadBackupRun(b)
	if err != nil {
		return "", err
	}
	var archive string
	err = env.locked(ctx, func() error {
		src := from
		if src == "" {
			if src, err = env.snapshot(ctx, label, false); err != nil {
				return err
			}
		}
		staged, err := backup.Stage(ctx, src, b.cfg.StateDir(), env.trust(legacyOK), env.limits())
		if err != nil {
			return err
		}
		defer staged.Remove()
		if staged.Signer == nil {
			b.ui.Warn("packaging an unsigned backup, as --legacy-backup says: %s; restoring the package needs --legacy-backup too", backup.LegacySkips)
		}
		archive, err = writePackage(ctx, env, staged, label)
		if err != nil && from == "" {
			return fmt.Errorf("snapshot saved at %s, but portable packaging failed: %w", src, err)
		}
		return err
	})
	return archive, err
}

// portableFiles are the project files a portable package carries, when
// present: the binaries and what they read.
var portableFiles = []string{
	"bin/hermes-box", "bin/hermes-box-agent-linux-arm64", "bin/hermes-box-agent-linux-amd64",
	"bin/hermes-box-agent-oci-linux-arm64", "bin/hermes-box-agent-oci-linux-amd64",
	"scripts/hermes-box", "Smolfile", "README.md", "hermes-box.conf.example", "secret-env.txt",
}

// hostPlatforms are the platforms `make dist` builds bin/hermes-box-<p> for.
var hostPlatforms = []string{"darwin-arm64", "linux-arm64", "linux-amd64"}

func writePackage(ctx context.Context, env *backupRun, staged *backup.Staged, label string) (string, error) {
	cfg := env.box.cfg
	p := &backup.Package{
		BaseArtifact: BaseArtifact(env.box),
		Backup:       &staged.Verified,
		BackupName:   filepath.Base(staged.Source),
		Config:       portableConfig(env),
		Label:        label,
		Now:          time.Now(),
	}
	info := portableInfo(env, p.BackupName)
	files := slices.Clone(portableFiles)
	for _, plat := range hostPlatforms {
		files = append(files, "bin/hermes-box-"+plat)
	}
	for _, f := range files {
		path := filepath.Join(cfg.ProjectRoot, f)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		p.Project = append(p.Project, backup.PackFile{Name: f, Path: path, Mode: fi.Mode().Perm()})
		if plat, ok := strings.CutPrefix(f, "bin/hermes-box-"); ok && slices.Contains(hostPlatforms, plat) {
			info.HostBinaries[plat] = f
		}
	}
	// The key the backup is bound to: a restore on the new host needs it.
	for _, suffix := range []string{"", keys.PubSuffix} {
		path := cfg.SSHKeyPath() + suffix
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("the portable package carries the project key: %w", err)
		}
		p.Project = append(p.Project, backup.PackFile{Name: filenames.StateDir + "/" + filenames.SSHKey + suffix, Path: path, Mode: 0o600})
	}
	sources, err := backup.ProjectSources(cfg.ProjectRoot)
	if err != nil {
		return "", err
	}
	have := map[string]bool{}
	for _, f := range p.Project {
		have[f.Name] = true
	}
	for _, s := range sources {
		if !have[s.Name] {
			p.Project = append(p.Project, s)
		}
	}
	p.Generated = []backup.GenFile{{Name: "PORTABLE.md", Data: info.Notes(), Mode: 0o644}, {Name: portableJSON, Data: info.JSON(), Mode: 0o644}}
	return p.Write(ctx, cfg.BackupsDir())
}

// portableJSON describes a portable package at its top.
const portableJSON = "portable.json"

// portableInfo describes the package for portable.json and PORTABLE.md.
func portableInfo(env *backupRun, backupName string) backup.PortableInfo {
	cfg := env.box.cfg
	info := backup.PortableInfo{Format: backup.PortableFormat, Created: time.Now().UTC().Format(time.RFC3339), Backup: backupName,
		HostBinaries: map[string]string{runtime.GOOS + "-" + runtime.GOARCH: "bin/hermes-box"}, HostVariables: []string{},
		Ports: []int{cfg.SSHPort}, KeyFingerprint: env.finger}
	info.Source.OS, info.Source.Arch, info.Source.HermesBox = runtime.GOOS, runtime.GOARCH, buildinfo.Version
	info.Source.Smolvm = env.box.drv.Version(context.Background())
	for _, m := range cfg.Secrets {
		info.HostVariables = append(info.HostVariables, m.Host)
	}
	if cfg.ExecutorEnabled {
		info.Ports = append(info.Ports, cfg.ExecutorPort)
	}
	return info
}

// portableConfig is the current configuration with the data dir and the
// SSH key path cleared: the key travels in the package's state/.
func portableConfig(env *backupRun) []byte {
	var sb strings.Builder
	sb.WriteString("# Generated by hermes-box package for portable restore.\n")
	for _, a := range env.box.cfg.Assignments() {
		switch a.Key {
		case "HERMES_BOX_DATA_DIR", "HERMES_BOX_SSH_KEY":
			a.Value = ""
		}
		sb.WriteString(a.String() + "\n")
	}
	return []byte(sb.String())
}

// NeedsRecovery reports an error that leaves the box for the next command
// to recover (an interrupted cut-over, a snapshot that could not restart
// the services): its message says how, even after Ctrl-C.
func NeedsRecovery(err error) bool {
	return errors.Is(err, backup.ErrInterrupted) || errors.Is(err, backup.ErrNotSettled)
}
