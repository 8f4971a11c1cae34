package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening network hosts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxLineBytes)
	var out []string
	seen := map[string]bool{}
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(text, "\ufeff")))
		switch {
		case text == "":
			continue
		case len(text) > 253 || !hostName.MatchString(text):
			return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("expected one host name (like api.example.com), got %q", text)}
		case seen[text]:
			return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("duplicate host %q", text)}
		}
		seen[text] = true
		out = append(out, text)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{File: path, Line: line + 1, Msg: "line too long"}
		}
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}
