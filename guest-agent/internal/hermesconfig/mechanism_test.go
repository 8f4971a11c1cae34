package hermesconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// leaves flattens a decoded YAML mapping into path → value.
func leaves(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = v
		return
	}
	for k, item := range m {
		leaves(prefix+"/"+k, item, out)
	}
}

func decodeLeaves(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	leaves("", v, out)
	return out
}

// comments returns every comment text in b (from '#' to the line's end).
func comments(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "#"); i >= 0 && !strings.Contains(line[:i], `"`) {
			out = append(out, strings.TrimSpace(line[i:]))
		}
	}
	return out
}

// checkSeedKeeps seeds in with the smart-plugin settings and checks that
// every comment and every user key survives (those the seed sets hold its
// value), that the seed is idempotent, and that the plugin is enabled next
// to the user's own plugins.
func checkSeedKeeps(t *testing.T, in []byte) {
	t.Helper()
	settings := SettingsFor(pins.GateSmartPlugin)
	out, err := SeedWith("config.yaml", in, settings)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comments(in) {
		if !strings.Contains(string(out), c) {
			t.Errorf("lost comment %q", c)
		}
	}
	seeded := map[string]any{}
	for _, s := range settings {
		seeded["/"+strings.Join(s.Path, "/")] = s.Value
	}
	before, after := decodeLeaves(t, in), decodeLeaves(t, out)
	for path, v := range before {
		if _, ok := seeded[path]; ok || path == "/plugins/enabled" {
			continue
		}
		if !reflect.DeepEqual(after[path], v) {
			t.Errorf("%s: %v became %v", path, v, after[path])
		}
	}
	for path, v := range seeded {
		if m, ok := v.(Member); ok {
			list, _ := after[path].([]any)
			if !contains(list, string(m)) {
				t.Errorf("%s = %v, want it to hold %s", path, after[path], m)
			}
			if old, _ := before[path].([]any); len(list) != len(old)+1 && !contains(old, string(m)) {
				t.Errorf("%s: %v became %v", path, old, list)
			}
			continue
		}
		if want := normalize(v); !reflect.DeepEqual(after[path], want) {
			t.Errorf("%s = %#v, want %#v", path, after[path], want)
		}
	}
	again, err := SeedWith("config.yaml", out, settings)
	if err != nil || string(again) != string(out) {
		t.Fatalf("not idempotent: %v\n%s", err, again)
	}
}

func contains(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func normalize(v any) any {
	if f, ok := v.(float64); ok && f == float64(int(f)) {
		return int(f)
	}
	return v
}

func TestSeedSmartPluginKeepsEveryUserKeyAndComment(t *testing.T) {
	in, err := os.ReadFile("testdata/hermes-0.19.0-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkSeedKeeps(t, in)
	out, _ := SeedWith("c", in, SmartPluginSettings)
	if !strings.Contains(string(out), "- disk-cleanup # a user plugin\n    - hermes-box-gate") {
		t.Errorf("plugin not appended after the user's:\n%s", out)
	}
}

// TestSeedRealDefaultConfig019 seeds Hermes 0.19.0's own default config
// (cli-config.yaml.example, which its installer copies to config.yaml).
func TestSeedRealDefaultConfig019(t *testing.T) {
	in, err := os.ReadFile(filepath.Join(hermestest.RealTree(t, "0.19.0"), "cli-config.yaml.example"))
	if err != nil {
		t.Fatal(err)
	}
	checkSeedKeeps(t, in)
}

func TestSettingsForMechanism(t *testing.T) {
	if m := SettingsFor(pins.GateSourcePatch)[0].Value; m != "gated" {
		t.Errorf("source-patch mode %v", m)
	}
	if m := SettingsFor(pins.GateSmartPlugin)[0].Value; m != "smart" {
		t.Errorf("smart-plugin mode %v", m)
	}
	out, err := SeedWith("c", []byte("plugins:\n  enabled: disk-cleanup # mine\n"), SmartPluginSettings)
	if err != nil || !strings.Contains(string(out), "enabled:\n    - disk-cleanup # mine\n    - hermes-box-gate\n") {
		t.Fatalf("a scalar plugins.enabled: %v\n%s", err, out)
	}
}
