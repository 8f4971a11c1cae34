package gate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
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

// managedHealth says what is wrong with the managed scope as the gateway
// meets it: the config.yaml that must parse (Hermes drops every pin of a
// file that does not, with only a warning) and pin each of the mechanism's
// keys at its value (a pinned list may hold what root added); the
// directory Hermes resolves (the probe's eff.ManagedDir) must be it; and
// the memory provider Hermes would import must be one of root's tree.
func managedHealth(t Target, rel pins.HermesRelease, eff Effective) []string {
	var out []string
	data, err := os.ReadFile(t.managedConfig())
	if err != nil {
		return []string{fmt.Sprintf("the managed scope's %s cannot be read: %v", t.managedConfig(), err)}
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []string{fmt.Sprintf("the managed scope's %s does not parse, so Hermes ignores every pin in it: %v", t.managedConfig(), err)}
	}
	for _, s := range hermesconfig.ManagedSettingsFor(rel.Mechanism) {
		if !pinned(doc, s) {
			out = append(out, fmt.Sprintf("%s does not pin %s at %v", t.managedConfig(), strings.Join(s.Path, "."), s.Value))
		}
	}
	if !sameDir(eff.ManagedDir, t.Managed) {
		out = append(out, fmt.Sprintf("Hermes reads its managed scope from %q, not root's %s", eff.ManagedDir, t.Managed))
	}
	if p := eff.MemoryProviderPath; p != "" && !within(p, filepath.Join(t.Source, "plugins", "memory")) {
		out = append(out, fmt.Sprintf("Hermes would import the memory provider %q from %s, outside root's tree", eff.MemoryProvider, p))
	}
	return out
}

// pinned says whether doc holds s's value at its path: a scalar equal, a
// List a list, a Member a list holding it.
func pinned(doc map[string]any, s hermesconfig.Setting) bool {
	var v any = doc
	for _, key := range s.Path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[key]; !ok {
			return false
		}
	}
	switch want := s.Value.(type) {
	case hermesconfig.List:
		_, ok := v.([]any)
		return ok
	case hermesconfig.Member:
		list, _ := v.([]any)
		return slices.Contains(list, any(string(want)))
	case int:
		return v == any(want) || v == any(float64(want))
	default:
		return v == s.Value
	}
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

func within(p, dir string) bool {
	rp, err1 := filepath.EvalSymlinks(p)
	rd, err2 := filepath.EvalSymlinks(dir)
	return err1 == nil && err2 == nil && strings.HasPrefix(rp, rd+string(filepath.Separator))
}

// pointerPending says whether the tree's record of the managed directory
// (patch.ManagedPointer) is missing or names another.
func pointerPending(t Target) string {
	want, err := pointerRecord(t)
	got, rerr := os.ReadFile(filepath.Join(t.Source, patch.ManagedPointer))
	if err == nil && rerr == nil && string(got) == want {
		return ""
	}
	return fmt.Sprintf("record the managed directory %s in the tree (%s)", t.Managed, patch.ManagedPointer)
}

// pointerRecord is the record of t.Managed: relative to the tree
// (../../../../etc/hermes in the box), so that a tree copied below
// another root, as the tests' boxes do, reads that root's directory.
func pointerRecord(t Target) (string, error) {
	rel, err := filepath.Rel(t.Source, t.Managed)
	if err != nil {
		return "", fmt.Errorf("recording the managed directory %s relative to the Hermes tree: %w", t.Managed, err)
	}
	return rel + "\n", nil
}

// WritePointer records managed in the Hermes tree at source, as the gate
// step does (`patch hermes` outside it).
func WritePointer(source, managed string) error {
	return writePointer(Target{Source: source, Managed: managed})
}

// writePointer records t.Managed in the tree, root's like the tree.
func writePointer(t Target) error {
	rec, err := pointerRecord(t)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(t.Source, patch.ManagedPointer), []byte(rec), 0o644); err != nil {
		return fmt.Errorf("recording the managed directory in the Hermes tree: %w", err)
	}
	return nil
}
