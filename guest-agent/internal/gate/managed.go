package gate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// managedConfig is the managed scope's config.yaml.
func (t Target) managedConfig() string { return filepath.Join(t.Managed, "config.yaml") }

// managedPending says what WriteManaged would change: the file must hold exactly the mechanism's settings, and it
// and its directory must belong to the agent (root in the box) and be
// writable by no one else.
func managedPending(t Target, rel pins.HermesRelease) ([]string, error) {
	if t.Managed == "" {
		return nil, fmt.Errorf("hermes %s: the gate is pinned in the managed scope, but no managed directory was given", rel.Version)
	}
	want, err := hermesconfig.Managed(hermesconfig.ManagedSettingsFor(rel.Mechanism))
	if err != nil {
		return nil, err
	}
	got, err := os.ReadFile(t.managedConfig())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", t.managedConfig(), err)
	}
	var pending []string
	if !bytes.Equal(got, want) {
		pending = append(pending, fmt.Sprintf("pin the gate's settings in Hermes' managed scope %s", t.managedConfig()))
	}
	for _, p := range []string{t.Managed, t.managedConfig()} {
		if problem := exclusive(p); problem != "" && got != nil {
			pending = append(pending, problem)
		}
	}
	return pending, nil
}

// exclusive says what is wrong when path is not the agent's own and
// writable by it alone; "" when it is.
func exclusive(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Sprintf("%s does not belong to the agent's user (uid %d)", path, os.Geteuid())
	case fi.Mode()&0o022 != 0 || fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Sprintf("%s is writable by others than its owner (%v)", path, fi.Mode())
	}
	return ""
}

// WriteManaged writes the settings of rel's mechanism into the managed
// scope at dir, readable by all and writable by the agent (root) alone.
// Hermes 0.17 and later read it themselves (rel.ManagedScope); on 0.16 the
// source patch's edits read it (tools/gated_approval.py, overlay_managed).
func WriteManaged(dir string, rel pins.HermesRelease) error {
	data, err := hermesconfig.Managed(hermesconfig.ManagedSettingsFor(rel.Mechanism))
	if err != nil {
		return err
	}
	if dir == "" {
		return fmt.Errorf("hermes %s: the gate is pinned in the managed scope, but no managed directory was given", rel.Version)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pinning the gate in the managed scope: %w", err)
	}
	if err := os.Lchown(dir, os.Geteuid(), os.Getegid()); err != nil {
		return fmt.Errorf("pinning the gate in the managed scope: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("pinning the gate in the managed scope: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "config.yaml"), data, 0o644); err != nil {
		return fmt.Errorf("pinning the gate in the managed scope: %w", err)
	}
	return nil
}
