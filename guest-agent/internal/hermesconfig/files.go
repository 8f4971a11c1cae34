package hermesconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// The rules every edit in this package follows:
//
//   - only UTF-8 text is edited (yaml.v3 reads a UTF-16 byte-order mark as an
//     encoding switch, so bytes kept verbatim could turn the written file into
//     something else on the next read);
//   - a YAML file holds exactly one document, whose top level is a mapping
//     (empty, comment-only and null documents count as an empty mapping;
//     their comments are kept above it);
//   - a file is replaced atomically and keeps its owner and mode; a new file
//     gets the owner of its directory (HERMES_HOME belongs to hermes, and the
//     agent writes as root) and mode 0600;
//   - on any refusal nothing is written, and the error names the file.

// loadDoc parses data under the rules; prefix holds the comments of an
// empty document, to be written above the new mapping.
func loadDoc(name string, data []byte) (doc *yaml.Node, prefix []byte, err error) {
	if !utf8.Valid(data) {
		return nil, nil, fmt.Errorf("%s: not UTF-8 text; refusing to edit it", name)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%s: holds more than one YAML document; refusing to edit it", name)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		prefix = bytes.TrimRight(data, " \t\r\n")
		doc = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		*root = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("%s: line %d: the top level is a %s, want a mapping; refusing to edit it", name, root.Line, kindName(root))
	}
	return doc, prefix, nil
}

// encodeDoc writes doc (two-space indents) below prefix.
func encodeDoc(name string, doc *yaml.Node, prefix []byte) ([]byte, error) {
	var buf bytes.Buffer
	if len(prefix) > 0 {
		buf.Write(prefix)
		buf.WriteString("\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", name, err)
	}
	return buf.Bytes(), nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "node of kind " + strconv.Itoa(int(n.Kind))
}

// readOptional returns the file's bytes and info, or nil, nil for a
// missing file.
func readOptional(path string) ([]byte, fs.FileInfo, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, fi, nil
}

// replace writes data to path atomically: an existing file (like) keeps
// its owner and mode, unless perm is non-zero, which then sets the mode; a
// new file gets its directory's owner and perm (0600 when zero).
func replace(path string, data []byte, like fs.FileInfo, perm fs.FileMode) error {
	if like == nil {
		if perm == 0 {
			perm = 0o600
		}
		if dir, err := os.Stat(filepath.Dir(path)); err == nil {
			like = modeInfo{FileInfo: dir, mode: perm}
		}
	} else if perm != 0 {
		like = modeInfo{FileInfo: like, mode: perm}
	}
	if err := atomicfile.WriteLike(path, data, like, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// modeInfo is a FileInfo with another permission.
type modeInfo struct {
	fs.FileInfo
	mode fs.FileMode
}

func (m modeInfo) Mode() fs.FileMode { return m.mode }
