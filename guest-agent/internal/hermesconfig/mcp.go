package hermesconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// ExecutorKeyVar is the .env variable holding Executor's API key.
const ExecutorKeyVar = "MCP_EXECUTOR_API_KEY"

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

// SetEnv sets name=value in the dotenv file at path, replacing an existing
// assignment and keeping every other line. The file keeps its owner (a new
// one gets its directory's) and is always 0600: it holds secrets.
func SetEnv(path, name, value string) error {
	if err := ValidateSecret(value); err != nil {
		return fmt.Errorf("%s: %s: %w", path, name, err)
	}
	old, like, err := readOptional(path)
	if err != nil {
		return err
	}
	if !utf8.Valid(old) {
		return fmt.Errorf("%s: not UTF-8 text; refusing to edit it", path)
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
	return replace(path, out.Bytes(), like, 0o600)
}

// ExecutorServer is the mcp_servers.executor entry; the key stays in .env
// and Hermes expands ${MCP_EXECUTOR_API_KEY} when it loads the config.
func ExecutorServer() *yaml.Node { return ExecutorServerAt(boxlayout.ExecutorURL) }

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
	old, like, err := readOptional(path)
	if err != nil {
		return err
	}
	doc, prefix, err := loadDoc(path, old)
	if err != nil {
		return err
	}
	servers, err := mappingValue(doc.Content[0], "mcp_servers", path)
	if err != nil {
		return err
	}
	setKey(servers, name, server)
	out, err := encodeDoc(path, doc, prefix)
	if err != nil {
		return err
	}
	return replace(path, out, like, 0)
}

// mappingValue returns the mapping under key in m, adding an empty one if
// the key is missing or null.
func mappingValue(m *yaml.Node, key, path string) (*yaml.Node, error) {
	if i := lookup(m, key); i >= 0 {
		v := m.Content[i]
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
	if i := lookup(m, key); i >= 0 {
		m.Content[i] = value
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}
