package config

import (
	"fmt"
	"regexp"
	"strings"
)

// NetworkHostsFileName is the allow-list of HERMES_BOX_NETWORK_MODE=strict
// in the project root: one host name per line, "#" starts a comment.
const NetworkHostsFileName = "network-hosts.txt"

// hostName is a DNS name of letters, digits and hyphens in dot-separated
// labels; no IP literal, wildcard, port or scheme.
var hostName = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.[a-z]{2,63}$`)

// LoadNetworkHosts reads network-hosts.txt. A missing file yields none;
// a bad or repeated line is an *Error naming the line.
func LoadNetworkHosts(path string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	err := readListFile(path, "network hosts", func(line int, text string) error {
		text = strings.ToLower(text)
		switch {
		case len(text) > 253 || !hostName.MatchString(text):
			return &Error{File: path, Line: line, Msg: fmt.Sprintf("expected one host name (like api.example.com), got %q", text)}
		case seen[text]:
			return &Error{File: path, Line: line, Msg: fmt.Sprintf("duplicate host %q", text)}
		}
		seen[text] = true
		out = append(out, text)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
