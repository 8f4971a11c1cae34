package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Installer puts the gate of the target's release into an installed Hermes:
// its source edits (verified, marked), its plugin where the mechanism has
// one, its config settings, also pinned in Hermes' managed scope where the
// release has one (out of the agent's reach); then asks Hermes itself whether the gate is
// active as intended.
type Installer struct {
	// Integration also drives the patched tools.approval in the source
	// patch's suite; it needs Hermes' own interpreter and dependencies.
	Integration bool
}

func (in Installer) patcher(t Target) *patch.Patcher {
	return &patch.Patcher{Runner: t.Runner, Python: t.Python, Integration: in.Integration}
}

func (t Target) config() string { return filepath.Join(t.Home, "config.yaml") }

// Pending lists what Apply would change; empty when the gate is in place.
// A marked tree is verified (writing nothing); a failed verification is an
// error, never a silent re-patch.
func (in Installer) Pending(ctx context.Context, t Target) ([]string, error) {
	rel, err := pins.Hermes(t.Commit)
	if err != nil {
		return nil, err
	}
	var pending []string
	if _, err := os.Stat(filepath.Join(t.Source, patch.MarkerFile)); errors.Is(err, fs.ErrNotExist) {
		pending = append(pending, fmt.Sprintf("edit the Hermes %s source for the %s gate (%s)", rel.Version, rel.Mechanism, rel.AnchorSet))
	} else if err != nil {
		return nil, fmt.Errorf("checking the gate marker: %w", err)
	} else if _, err := in.patcher(t).Patch(ctx, t.Source, t.Commit); err != nil {
		return nil, err
	}
	if rel.Mechanism == pins.GateSmartPlugin {
		if files := pluginPending(t.Source, t.Home); len(files) > 0 {
			pending = append(pending, "install the gate plugin: "+strings.Join(files, ", "))
		}
	}
	data, err := os.ReadFile(t.config())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", t.config(), err)
	}
	seeded, err := hermesconfig.SeedWith(t.config(), data, hermesconfig.SettingsFor(rel.Mechanism))
	if err != nil {
		return nil, err
	}
	if string(seeded) != string(data) {
		pending = append(pending, fmt.Sprintf("seed %s for approvals.mode %s", t.config(), rel.Mechanism.IntendedMode()))
	}
	managed, err := managedPending(t, rel)
	if err != nil {
		return nil, err
	}
	pending = append(pending, managed...)
	if p := pointerPending(t); p != "" {
		pending = append(pending, p)
	}
	if len(pending) > 0 {
		return pending, nil
	}
	if problems, err := in.verify(ctx, t, rel); err != nil || len(problems) > 0 {
		return []string{"the installed Hermes does not resolve the gate as provisioned: " + strings.Join(problems, "; ")}, err
	}
	return nil, nil
}

// Apply edits the tree (recording its commit, so it can be re-verified once
// cleanup has removed .git), installs the plugin, seeds the config, and
// fails unless the installed Hermes then resolves the gate as intended.
func (in Installer) Apply(ctx context.Context, t Target) error {
	rel, err := pins.Hermes(t.Commit)
	if err != nil {
		return err
	}
	if _, err := in.patcher(t).Patch(ctx, t.Source, t.Commit); err != nil {
		return err
	}
	if err := patch.WriteSourceMarker(t.Source, t.Commit); err != nil {
		return err
	}
	if rel.Mechanism == pins.GateSmartPlugin {
		if err := InstallPlugin(t.Source, t.Home); err != nil {
			return err
		}
	}
	if _, err := hermesconfig.SeedFileWith(t.config(), hermesconfig.SettingsFor(rel.Mechanism)); err != nil {
		return err
	}
	if err := WriteManaged(t.Managed, rel); err != nil {
		return err
	}
	if err := writePointer(t); err != nil {
		return err
	}
	if err := compileImports(ctx, t, rel); err != nil {
		return err
	}
	problems, err := in.verify(ctx, t, rel)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("hermes %s (%s): the installed Hermes does not resolve the gate as provisioned: %s",
			rel.Version, rel.Mechanism, strings.Join(problems, "; "))
	}
	return nil
}

func (in Installer) verify(ctx context.Context, t Target, rel pins.HermesRelease) ([]string, error) {
	eff, err := probeFresh(ctx, t, rel)
	if err != nil {
		return nil, err
	}
	return append(Verify(rel, eff), managedHealth(t, rel, eff)...), nil
}

// compileImports has the probe's imports (Hermes' approval code, config,
// plugin manager, auxiliary client, the gate's plugin) write their bytecode,
// as root, once the gate's edits are in: Hermes runs as the hermes user,
// who cannot write __pycache__ in root's tree, so without it every Hermes
// process and every probe compiles those modules from source (half a
// probe's CPU time here, minutes under emulation). It imports with a fresh
// home, so Hermes writes nothing as root into its own; only what is
// imported is compiled (3 MB of bytecode, not the 33 MB of the whole tree).
func compileImports(ctx context.Context, t Target, rel pins.HermesRelease) error {
	home, err := os.MkdirTemp("", "hermes-box-gate-compile-")
	if err != nil {
		return fmt.Errorf("compiling Hermes' bytecode: %w", err)
	}
	defer os.RemoveAll(home)
	root := t
	root.Home, root.User = home, ""
	if _, err := runProbe(ctx, root, rel, "hermes-box-gate-compile-*.py", compileTimeout, "HOME="+home); err != nil {
		return fmt.Errorf("compiling Hermes' bytecode: %w", err)
	}
	return nil
}
