package hermesconfig

import (
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// TestManagedPinsEverySetting decodes the managed config and finds every
// setting of both mechanisms at its value, and nothing else.
func TestManagedPinsEverySetting(t *testing.T) {
	for name, settings := range map[string][]Setting{"source-patch": ManagedSettingsFor(pins.GateSourcePatch),
		"smart-plugin": ManagedSettingsFor(pins.GateSmartPlugin)} {
		t.Run(name, func(t *testing.T) {
			b, err := Managed(settings)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			leaves("", doc, got)
			if len(got) != len(settings) {
				t.Errorf("%d leaves for %d settings:\n%s", len(got), len(settings), b)
			}
			for _, s := range settings {
				want := s.Value
				switch item := want.(type) {
				case Member:
					want = []any{string(item)}
				case List:
					want = []any{}
				}
				key := ""
				for _, p := range s.Path {
					key += "/" + p
				}
				if !reflect.DeepEqual(got[key], want) {
					t.Errorf("%s = %#v, want %#v", key, got[key], want)
				}
			}
			again, _ := Managed(settings)
			if string(again) != string(b) {
				t.Error("two renderings differ")
			}
		})
	}
	if keys := ManagedKeys(ManagedSettingsFor(pins.GateSmartPlugin)); keys[0] != "approvals.mode" || !slices.Contains(keys, "approvals.deny") || !slices.Contains(keys, "memory.provider") {
		t.Errorf("%q", keys)
	}
}
