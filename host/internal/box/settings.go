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
}

func settingsOf(c *config.Config) Settings {
	return Settings{Machine: c.MachineName, SSHPort: c.SSHPort, ExecutorEnabled: c.ExecutorEnabled, ExecutorPort: c.ExecutorPort,
		NetworkMode: string(c.NetworkMode), CPUs: c.CPUs, MemoryMiB: c.MemoryMiB, StorageGB: c.StorageGB, OverlayGB: c.OverlayGB}
}

// recordSettings writes what the box was just created with.
func recordSettings(b *Box) error {
	data, err := json.MarshalIndent(settingsOf(b.cfg), "", "  ")
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
	return out
}

// driftNext is how to apply the configuration: the box is re-created from
// a backup of itself (restore creates it with the configuration), or the
// configuration is put back.
const driftNext = "these are fixed when a box is created: to apply them, re-create the box from a backup of itself — " +
	"hermes-box snapshot before-change, hermes-box destroy --force, then hermes-box restore with the name snapshot printed — " +
	"or put the values it was created with back in the configuration"

// warnDrift says, before anything waits on the box, which settings differ
// from what it was created with and how to apply them.
func warnDrift(b *Box) {
	drift := Drift(b)
	for _, d := range drift {
		b.ui.Warn("%s", d)
	}
	if len(drift) > 0 {
		b.ui.Warn("%s", driftNext)
	}
}
