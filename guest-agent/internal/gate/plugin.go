package gate

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// The plugin's module is kept as gate_plugin.py here (so Python test
// discovery does not import the directory as a package) and installed as
// the __init__.py Hermes' loader wants.
//
//go:embed plugin/gate_plugin.py plugin/plugin.yaml
var pluginFS embed.FS

// PluginDir is where the plugin lives, relative to the Hermes source tree:
// with Hermes' bundled plugins (hermes_cli.plugins reads the tree's plugins/
// directory), root's like the rest of the tree, out of the reach of the
// hermes user, who owns HERMES_HOME. A plugin of the same name in
// HERMES_HOME/plugins would override it; the probe reports where the loaded
// plugin came from, so the health check names such an override.
const PluginDir = "plugins/" + hermesconfig.PluginName

// UserPluginDir is where agents before this one installed the plugin,
// relative to HERMES_HOME; a copy left there would override the bundled one.
const UserPluginDir = PluginDir

// PluginFiles returns the plugin's files by name: its manifest, its module,
// and the reviewer (the same gated_approval.py the source patch installs).
func PluginFiles() map[string][]byte {
	out := map[string][]byte{"gated_approval.py": patch.Module()}
	for name, embedded := range map[string]string{"__init__.py": "gate_plugin.py", "plugin.yaml": "plugin.yaml"} {
		b, err := pluginFS.ReadFile("plugin/" + embedded)
		if err != nil {
			panic("gate: missing embedded plugin file " + embedded)
		}
		out[name] = b
	}
	return out
}

// pluginPending lists what InstallPlugin would change: plugin files in the
// tree at source that differ from this agent's, and a user-plugin copy in
// home that would override them.
func pluginPending(source, home string) []string {
	var out []string
	files := PluginFiles()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join(source, PluginDir, name))
		if err != nil || !bytes.Equal(got, files[name]) {
			out = append(out, PluginDir+"/"+name)
		}
	}
	if _, err := os.Lstat(filepath.Join(home, UserPluginDir)); err == nil {
		out = append(out, "remove the overriding copy "+filepath.Join(home, UserPluginDir))
	}
	return out
}

// InstallPlugin writes the plugin into the Hermes tree at source, each file
// atomically (0644, the directory 0755, owned by the agent: root in the
// box), and removes a copy in home's user plugins that would override it.
func InstallPlugin(source, home string) error {
	dir := filepath.Join(source, PluginDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("installing the gate plugin: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("installing the gate plugin: %w", err)
	}
	for name, data := range PluginFiles() {
		if err := atomicfile.Write(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("installing the gate plugin: %w", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(home, UserPluginDir)); err != nil {
		return fmt.Errorf("removing the overriding user copy of the gate plugin: %w", err)
	}
	return nil
}
