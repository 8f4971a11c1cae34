package box

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

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
		staged, err := backupset.Stage(ctx, src, b.cfg.StateDir(), env.trust(legacyOK), env.limits(), env.signer)
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
	// The README links its internals in docs/: the package's copy too.
	docs, _ := filepath.Glob(filepath.Join(cfg.ProjectRoot, "docs", "*.md"))
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
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
