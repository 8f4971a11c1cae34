package hermesconfig

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// managedHeader opens the managed config hermes-box writes.
const managedHeader = "# Written by hermes-box: the approval gate's settings, pinned in Hermes' managed scope\n" +
	"# (root-owned; these keys win over HERMES_HOME/config.yaml and `hermes config set` refuses them).\n"

// List as a Setting's value pins the whole list (managed scope only).
type List []string

// ManagedSettingsFor is what the managed scope pins for a mechanism: its
// settings, and lists whose every entry loosens the gate, pinned whole:
// command_allowlist (commands approved for ever without review) empty, and
// on 0.19's smart-plugin approvals.deny (rules that block without review)
// as provisioned, so the agent can neither add an allowlist entry nor
// remove a deny rule; both are edited in the managed file, as root. The
// keys that select code Hermes imports are pinned too (CodeSettings).
func ManagedSettingsFor(m pins.GateMechanism) []Setting {
	out := append([]Setting(nil), SettingsFor(m)...)
	out = append(out, Setting{[]string{"command_allowlist"}, List{}})
	if m == pins.GateSmartPlugin {
		out = append(out, Setting{[]string{"approvals", "deny"}, List{}})
	}
	out = append(out, CodeSettings...)
	if m != pins.GateSmartPlugin {
		// No plugin is enabled where the gate has none (0.16, 0.17).
		out = append(out, Setting{[]string{"plugins", "enabled"}, List{}})
	}
	return out
}

// CodeSettings pin the keys that select code Hermes imports into the
// gateway and every agent to root's bundled choices: no external memory
// provider (Hermes' own memory stays), the bundled context compressor, and
// no plugin disabled (the gate plugin cannot be switched off); which
// plugins are enabled is pinned with the mechanism's settings.
var CodeSettings = []Setting{
	{[]string{"memory", "provider"}, ""},
	{[]string{"context", "engine"}, "compressor"},
	{[]string{"plugins", "disabled"}, List{}},
}

// Managed returns the managed scope's config.yaml pinning every setting at
// its value; a Member pins its list to that one item (so plugins.enabled
// there names the gate plugin: another plugin is enabled by adding it here,
// as root).
func Managed(settings []Setting) ([]byte, error) {
	root := map[string]any{}
	for _, s := range settings {
		m := root
		for _, key := range s.Path[:len(s.Path)-1] {
			child, ok := m[key].(map[string]any)
			if !ok {
				child = map[string]any{}
				m[key] = child
			}
			m = child
		}
		v := s.Value
		switch item := v.(type) {
		case Member:
			v = []string{string(item)}
		case List:
			v = []string(item)
		}
		m[s.Path[len(s.Path)-1]] = v
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("writing the managed Hermes config: %w", err)
	}
	return append([]byte(managedHeader), out...), nil
}

// ManagedKeys lists the dotted keys Managed pins, in the settings' order
// (the form Hermes' managed_scope.managed_config_keys returns).
func ManagedKeys(settings []Setting) []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = strings.Join(s.Path, ".")
	}
	return out
}
