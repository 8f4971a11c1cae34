package box

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Settings are the configuration a box was created with (init, or a
// restore that created it): smolvm fixes them at create, so a later
// configuration does not change the box, and hermes-box keeps using them.
type Settings struct {
	Machine         string `json:"machine"`
	SSHPort         int    `json:"sshPort"`
	ExecutorEnabled bool   `json:"executorEnabled"`
	ExecutorPort    int    `json:"executorPort"`
	NetworkMode     string `json:"networkMode"`
	CPUs            int    `json:"cpus"`
	MemoryMiB       int    `json:"memoryMiB"`
	StorageGB       int    `json:"storageGB"`
	OverlayGB       int    `json:"overlayGB"`
	// HermesCommit is the Hermes the box runs: the commit its base image
	// was built with, or the one a restore's health check found (a full
	// restore brings the backup's root file system, with its Hermes).
	// Empty in a record made before it was kept: no drift is named then.
	HermesCommit string `json:"hermesCommit,omitempty"`
}

func settingsOf(c *config.Config) Settings {
	return Settings{Machine: c.MachineName, SSHPort: c.SSHPort, ExecutorEnabled: c.ExecutorEnabled, ExecutorPort: c.ExecutorPort,
		NetworkMode: string(c.NetworkMode), CPUs: c.CPUs, MemoryMiB: c.MemoryMiB, StorageGB: c.StorageGB, OverlayGB: c.OverlayGB,
		HermesCommit: c.HermesCommit}
}

// recordSettings writes what the box was just created with.
func recordSettings(b *Box) error {
	return writeSettings(b, settingsOf(b.cfg))
}

// recordHermes records the Hermes commit of version (what a restored
// box's health check reported) as the one the box runs; a version the pins
// table does not name leaves the record as it is.
func recordHermes(b *Box, version string) error {
	rel, err := pins.HermesByVersion(version)
	if version == "" || err != nil {
		return nil
	}
	b.cfg.HermesCommit = rel.Commit
	return writeSettings(b, settingsOf(b.cfg))
}

func writeSettings(b *Box, s Settings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(b.cfg.StateDir(), filenames.BoxSettings), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("recording the box's settings: %w", err)
	}
	return nil
}

// forgetSettings removes the record (the box is gone).
func forgetSettings(b *Box) error {
	err := os.Remove(filepath.Join(b.cfg.StateDir(), filenames.BoxSettings))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the box's settings: %w", err)
	}
	return nil
}

// adoptSettings reads what the box was created with and makes it the
// box's configuration, keeping what the configuration asks for as
// b.wanted: every command then reaches the box where it is (the port it
// publishes, the network mode it was made with), and the differences are
// named (Drift). A box without a record (made before records were kept)
// is left to its configuration.
func adoptSettings(b *Box) error {
	data, err := os.ReadFile(filepath.Join(b.cfg.StateDir(), filenames.BoxSettings))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the box's settings: %w", err)
	}
	var s Settings
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reading the box's settings %s: %w", filepath.Join(b.cfg.StateDir(), filenames.BoxSettings), err)
	}
	if s.Machine != b.cfg.MachineName {
		return nil // a record of another machine: this one is not created yet
	}
	wanted := *b.cfg
	b.wanted = &wanted
	c := *b.cfg
	c.SSHPort, c.ExecutorEnabled, c.ExecutorPort, c.NetworkMode = s.SSHPort, s.ExecutorEnabled, s.ExecutorPort, config.NetworkMode(s.NetworkMode)
	c.CPUs, c.MemoryMiB, c.StorageGB, c.OverlayGB = s.CPUs, s.MemoryMiB, s.StorageGB, s.OverlayGB
	if s.HermesCommit != "" {
		c.HermesCommit = s.HermesCommit
	}
	b.cfg = &c
	return nil
}

// configured is the configuration as loaded (what the user asks for).
func configured(b *Box) *config.Config {
	if b.wanted != nil {
		return b.wanted
	}
	return b.cfg
}

// useConfiguration drops what an earlier box was created with: init
// creates a new box with the configuration (a record left by a box deleted
// outside hermes-box is not this one's).
func useConfiguration(b *Box) {
	if b.wanted != nil {
		b.cfg, b.wanted = b.wanted, nil
	}
}

// Drift names each setting the configuration asks for that differs from
// what the box was created with, and what it takes to apply it.
func Drift(b *Box) []string {
	if b.wanted == nil {
		return nil
	}
	have, want := settingsOf(b.cfg), settingsOf(b.wanted)
	var out []string
	add := func(key string, had, wants string) {
		if had != wants {
			out = append(out, fmt.Sprintf("%s is %s in the configuration, but the box was created with %s and keeps it", key, wants, had))
		}
	}
	itoa := strconv.Itoa
	add("HERMES_BOX_SSH_PORT", itoa(have.SSHPort), itoa(want.SSHPort))
	add("HERMES_BOX_NETWORK_MODE", have.NetworkMode, want.NetworkMode)
	add("HERMES_BOX_CPUS", itoa(have.CPUs), itoa(want.CPUs))
	add("HERMES_BOX_MEMORY_MIB", itoa(have.MemoryMiB), itoa(want.MemoryMiB))
	add("HERMES_BOX_STORAGE_GB", itoa(have.StorageGB), itoa(want.StorageGB))
	add("HERMES_BOX_OVERLAY_GB", itoa(have.OverlayGB), itoa(want.OverlayGB))
	if have.ExecutorEnabled {
		add("HERMES_BOX_EXECUTOR_PORT", itoa(have.ExecutorPort), itoa(want.ExecutorPort))
	}
	if have.HermesCommit != want.HermesCommit {
		out = append(out, fmt.Sprintf("HERMES_BOX_HERMES_COMMIT is %s in the configuration, but the box runs %s, installed in its root file system when it was built, and keeps it",
			hermesName(want.HermesCommit), hermesName(have.HermesCommit)))
	}
	return out
}

// hermesName is a Hermes commit with its release, when the pins table
// names it.
func hermesName(commit string) string {
	if rel, err := pins.Hermes(commit); err == nil {
		return commit + " (Hermes " + rel.Version + ")"
	}
	return commit
}

// DriftNext is how to apply what Drift names: a changed Hermes commit
// takes the upgrade path (upgradeNext), which applies every other setting
// too; the other settings, driftNext.
func DriftNext(b *Box) string {
	if len(Drift(b)) == 0 {
		return ""
	}
	if b.cfg.HermesCommit != b.wanted.HermesCommit {
		return upgradeNext
	}
	return driftNext
}

// upgradeNext is the upgrade path: a new box built with the configured
// commit (and this hermes-box's agent), then the workspace of a backup of
// the old one restored onto it. A plain restore of that backup would bring
// its root file system, with the old Hermes, back.
const upgradeNext = "Hermes is part of the box's root file system, which a restart keeps and a plain restore brings back from the backup: " +
	"to move the box to it and keep the workspace, hermes-box snapshot before-upgrade, hermes-box destroy --force, hermes-box init " +
	"(which builds the image with it), then hermes-box restore before-upgrade --workspace-only (docs/backups.md, \"Upgrading\"); " +
	"or put the commit the box runs back in the configuration"

// driftNext is how to apply the configuration: the box is re-created from
// a backup of itself (restore creates it with the configuration), or the
// configuration is put back.
const driftNext = "these are fixed when a box is created: to apply them, re-create the box from a backup of itself — " +
	"hermes-box snapshot before-change, hermes-box destroy --force, then hermes-box restore with the name snapshot printed — " +
	"or put the values it was created with back in the configuration"

// warnDrift says, before anything waits on the box, which settings differ
// from what it was created with and how to apply them.
func warnDrift(b *Box) {
	for _, d := range Drift(b) {
		b.ui.Warn("%s", d)
	}
	if next := DriftNext(b); next != "" {
		b.ui.Warn("%s", next)
	}
}
