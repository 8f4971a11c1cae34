// Package hermesconfig is the one place that edits Hermes' own
// configuration in HERMES_HOME, under one rule set (files.go): UTF-8 only,
// one YAML document, owner and mode kept, atomic replacement.
//
// It seeds config.yaml with the settings Hermes Box depends on: the approval gate of the installed release's mechanism
// (the patched "gated" mode and its gate block, or Hermes' own smart mode,
// its reviewer model and the gate plugin), the security switches, and the
// local terminal backend (container backends skip approvals entirely). It
// edits the YAML at the node level, so every other key, its comments and its
// order survive; a file that already holds the settings is returned byte for
// byte. It also sets one variable of the .env file and one entry of
// mcp_servers (Executor).
package hermesconfig

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// Setting is one value Hermes Box pins, by its key path.
type Setting struct {
	Path  []string
	Value any // string, int, float64, bool, or Member
}

// Member as a Setting's value means: the list at Path holds this string
// (added at its end when missing; the list's other items stay).
type Member string

// Settings (the source-patch mechanism's, Hermes 0.16/0.17) are applied in
// this order; new keys are appended in this order.
var Settings = []Setting{
	{[]string{"approvals", "mode"}, "gated"},
	{[]string{"approvals", "timeout"}, 60},
	{[]string{"approvals", "cron_mode"}, "deny"},
	{[]string{"approvals", "gateway_timeout"}, 300},
	{[]string{"approvals", "gate", "enabled"}, true},
	{[]string{"approvals", "gate", "provider"}, "openai-codex"},
	{[]string{"approvals", "gate", "model"}, "gpt-5.5"},
	{[]string{"approvals", "gate", "reasoning_effort"}, "low"},
	{[]string{"approvals", "gate", "service_tier"}, "fast"},
	{[]string{"approvals", "gate", "timeout"}, 30},
	{[]string{"approvals", "gate", "scope"}, "once"},
	{[]string{"approvals", "gate", "min_confidence"}, 0.75},
	{[]string{"approvals", "gate", "max_context_chars"}, 12000},
	{[]string{"approvals", "gate", "auto_approve_max_risk"}, "medium"},
	{[]string{"approvals", "gate", "escalate_on_error"}, true},
	{[]string{"approvals", "gate", "escalate_on_low_confidence"}, true},
	{[]string{"security", "redact_secrets"}, true},
	{[]string{"security", "tirith_enabled"}, true},
	{[]string{"terminal", "backend"}, "local"},
}

// PluginName is the hermes-box-gate plugin's name in plugins.enabled.
const PluginName = "hermes-box-gate"

// SmartPluginSettings are the smart-plugin mechanism's (Hermes 0.19): Hermes'
// own smart mode with the seed's reviewer (openai-codex, the model, low
// reasoning, the priority tier, 30 s), cron denied, and the gate plugin
// enabled. Hermes 0.19 waits approvals.timeout at the gateway (it no longer
// reads gateway_timeout), so that is 300 s there; the plugin keeps the
// interactive chat's prompt (HermesCLI._approval_callback, which reads
// approvals.timeout itself) at 60 s.
var SmartPluginSettings = []Setting{
	{[]string{"approvals", "mode"}, "smart"},
	{[]string{"approvals", "timeout"}, 300},
	{[]string{"approvals", "cron_mode"}, "deny"},
	{[]string{"auxiliary", "approval", "provider"}, "openai-codex"},
	{[]string{"auxiliary", "approval", "model"}, "gpt-5.5"},
	{[]string{"auxiliary", "approval", "reasoning_effort"}, "low"},
	{[]string{"auxiliary", "approval", "timeout"}, 30},
	{[]string{"auxiliary", "approval", "extra_body", "service_tier"}, "priority"},
	{[]string{"plugins", "enabled"}, Member(PluginName)},
	{[]string{"security", "redact_secrets"}, true},
	{[]string{"security", "tirith_enabled"}, true},
	{[]string{"terminal", "backend"}, "local"},
}

// SettingsFor returns the settings of a gate mechanism.
func SettingsFor(m pins.GateMechanism) []Setting {
	if m == pins.GateSmartPlugin {
		return SmartPluginSettings
	}
	return Settings
}

// Seed returns data with the source-patch Settings applied.
func Seed(name string, data []byte) ([]byte, error) { return SeedWith(name, data, Settings) }

// SeedWith returns data with every setting applied; name is used in errors.
// When nothing needs to change it returns data itself.
func SeedWith(name string, data []byte, settings []Setting) ([]byte, error) {
	doc, prefix, err := loadDoc(name, data)
	if err != nil {
		return nil, err
	}
	root := doc.Content[0]
	changed := false
	for _, s := range settings {
		m := root
		for _, key := range s.Path[:len(s.Path)-1] {
			m = childMapping(m, key, &changed)
		}
		if item, ok := s.Value.(Member); ok {
			addMember(m, s.Path[len(s.Path)-1], string(item), &changed)
			continue
		}
		setScalar(m, s.Path[len(s.Path)-1], s.Value, &changed)
	}
	if !changed {
		return data, nil
	}
	return encodeDoc(name, doc, prefix)
}

// lookup returns the index of key's value in mapping m, or -1.
func lookup(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i + 1
		}
	}
	return -1
}

// childMapping returns the mapping under key, replacing a non-mapping value
// or appending the key when missing.
func childMapping(m *yaml.Node, key string, changed *bool) *yaml.Node {
	i := lookup(m, key)
	if i >= 0 && m.Content[i].Kind == yaml.MappingNode {
		return m.Content[i]
	}
	child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	*changed = true
	if i >= 0 {
		child.LineComment = m.Content[i].LineComment
		m.Content[i] = child
		return child
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
	return child
}

// setScalar sets key to value unless it already decodes to value.
func setScalar(m *yaml.Node, key string, value any, changed *bool) {
	i := lookup(m, key)
	if i >= 0 && m.Content[i].Kind == yaml.ScalarNode {
		var got any
		if err := m.Content[i].Decode(&got); err == nil && reflect.DeepEqual(got, value) {
			return
		}
	}
	n := scalar(value)
	*changed = true
	if i >= 0 {
		n.LineComment, n.HeadComment, n.FootComment = m.Content[i].LineComment, m.Content[i].HeadComment, m.Content[i].FootComment
		m.Content[i] = n
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
}

// addMember makes the list under key hold item, creating the list when
// needed; a single scalar there becomes the list's first item.
func addMember(m *yaml.Node, key, item string, changed *bool) {
	i := lookup(m, key)
	if i >= 0 && m.Content[i].Kind == yaml.SequenceNode {
		for _, n := range m.Content[i].Content {
			if n.Kind == yaml.ScalarNode && n.Value == item {
				return
			}
		}
		m.Content[i].Content = append(m.Content[i].Content, scalar(item))
		*changed = true
		return
	}
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{scalar(item)}}
	*changed = true
	if i >= 0 {
		if old := m.Content[i]; old.Kind == yaml.ScalarNode && old.Tag != "!!null" && old.Value != "" {
			if old.Value == item {
				list.Content = nil
			}
			list.Content = append([]*yaml.Node{old}, list.Content...)
		} else {
			list.LineComment = old.LineComment
		}
		m.Content[i] = list
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, list)
}

func scalar(v any) *yaml.Node {
	switch v := v.(type) {
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(v, 'f', -1, 64)}
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(v)}
	}
}

// SeedFile applies Seed to the file at path.
func SeedFile(path string) (bool, error) { return SeedFileWith(path, Settings) }

// SeedFileWith applies SeedWith to the file at path, atomically and keeping
// its mode; a missing file is created (0600). It reports whether it wrote.
func SeedFileWith(path string, settings []Setting) (bool, error) {
	data, like, err := readOptional(path)
	if err != nil {
		return false, fmt.Errorf("seeding Hermes config: %w", err)
	}
	out, err := SeedWith(path, data, settings)
	if err != nil {
		return false, err
	}
	if data != nil && bytes.Equal(out, data) {
		return false, nil
	}
	if err := replace(path, out, like, 0); err != nil {
		return false, fmt.Errorf("seeding Hermes config: %w", err)
	}
	return true, nil
}
