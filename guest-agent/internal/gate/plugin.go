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

// PluginDir is where the plugin lives, relative to HERMES_HOME (Hermes 0.19
// loads user plugins from HERMES_HOME/plugins/<name>).
const PluginDir = "plugins/" + hermesconfig.PluginName

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

// pluginPending lists the plugin files under home that differ from this
// agent's.
func pluginPending(home string) []string {
	var out []string
	files := PluginFiles()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join(home, PluginDir, name))
		if err != nil || !bytes.Equal(got, files[name]) {
			out = append(out, PluginDir+"/"+name)
		}
	}
	return out
}

// InstallPlugin writes the plugin under home, each file atomically (0644).
func InstallPlugin(home string) error {
	dir := filepath.Join(home, PluginDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("installing the gate plugin: %w", err)
	}
	for name, data := range PluginFiles() {
		if err := atomicfile.Write(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("installing the gate plugin: %w", err)
		}
	}
	return nil
}
