// Package hermescfg edits Hermes Agent's own configuration in HERMES_HOME:
// one variable of its .env file and one entry of mcp_servers in config.yaml.
// The YAML is merged node by node, so the user's comments, order and other
// keys stay as they were; files are replaced atomically.
package hermescfg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// ExecutorKeyVar is the .env variable holding Executor's API key.
const ExecutorKeyVar = "MCP_EXECUTOR_API_KEY"

// ExecutorURL is Executor's MCP endpoint as Hermes reaches it in the box.
const ExecutorURL = "http://127.0.0.1:4788/mcp"

// ValidateSecret refuses values that a dotenv line cannot carry verbatim.
// The value itself never appears in the error.
func ValidateSecret(v string) error {
	if v == "" {
		return errors.New("the API key is empty")
	}
	for _, r := range v {
		if r <= ' ' || r > '~' || strings.ContainsRune(`"'\#$`+"`", r) {
			return errors.New("the API key has a character outside printable ASCII without spaces, quotes, '#', '$' or '\\'")
		}
	}
	return nil
}

// SetEnv sets name=value in the dotenv file at path (created 0600 if
// missing), replacing an existing assignment and keeping every other line.
func SetEnv(path, name, value string) error {
	if err := ValidateSecret(value); err != nil {
		return fmt.Errorf("%s: %s: %w", path, name, err)
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var out bytes.Buffer
	found := false
	sc := bufio.NewScanner(bytes.NewReader(old))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok && strings.TrimSpace(key) == name {
			if found {
				continue
			}
			found = true
			line = name + "=" + value
		}
		out.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if !found {
		out.WriteString(name + "=" + value + "\n")
	}
	return atomicfile.Write(path, out.Bytes(), 0o600)
}

// ExecutorServer is the mcp_servers.executor entry; the key stays in .env
// and Hermes expands ${MCP_EXECUTOR_API_KEY} when it loads the config.
func ExecutorServer() *yaml.Node { return ExecutorServerAt(ExecutorURL) }

// ExecutorServerAt is ExecutorServer for Executor's MCP endpoint at url.
func ExecutorServerAt(url string) *yaml.Node {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		str("url"), str(url),
		str("headers"), {Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			str("Authorization"), str("Bearer ${" + ExecutorKeyVar + "}"),
		}},
		str("enabled"), {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
	}}
}

// SetMCPServer sets mcp_servers.<name> in the YAML file at path to server,
// creating the file or the mapping when missing. Nothing else changes.
func SetMCPServer(path, name string, server *yaml.Node) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(old, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		*top = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: line %d: the document is not a mapping", path, top.Line)
	}
	servers, err := mappingValue(top, "mcp_servers", path)
	if err != nil {
		return err
	}
	setKey(servers, name, server)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.Write(path, out.Bytes(), mode)
}

// mappingValue returns the mapping under key in m, adding an empty one if
// the key is missing or null.
func mappingValue(m *yaml.Node, key, path string) (*yaml.Node, error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		v := m.Content[i+1]
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			*v = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: line %d: %s is not a mapping", path, v.Line, key)
		}
		return v, nil
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v, nil
}

// setKey replaces the value of key in m, or appends key: value.
func setKey(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}
