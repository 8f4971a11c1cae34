// Package smolfile reads the subset of smolvm 1.0.4's Smolfile (TOML) that
// `pack create --smolfile` needs: scalar and string-array values at the top
// level and in the [artifact] (alias [pack]) table. Like smolvm it refuses
// unknown keys; tables it knows but the stand-in does not use are parsed and
// ignored, and inline tables (the [secrets] values) are refused.
package smolfile

import (
	"fmt"
	"strconv"
	"strings"
)

// Smolfile holds the keys the stand-in uses.
type Smolfile struct {
	Image      string
	Entrypoint []string
	Cmd        []string
	Env        []string
	Workdir    string
	CPUs       int
	Memory     int
	Storage    int
	Overlay    int
	Net        bool
}

type kind int

const (
	kString kind = iota
	kInt
	kBool
	kStrings
)

// keys lists every key smolvm 1.0.4 accepts, per table, with its kind.
var keys = map[string]map[string]kind{
	"": {"image": kString, "entrypoint": kStrings, "cmd": kStrings, "env": kStrings, "workdir": kString,
		"cpus": kInt, "memory": kInt, "net": kBool, "gpu": kBool, "gpu_vram": kInt, "storage": kInt,
		"overlay": kInt, "ports": kStrings, "volumes": kStrings, "init": kStrings},
	"network":  {"allow_hosts": kStrings, "allow_cidrs": kStrings},
	"dev":      {"volumes": kStrings, "env": kStrings, "init": kStrings, "workdir": kString, "ports": kStrings},
	"artifact": {"cpus": kInt, "memory": kInt, "entrypoint": kStrings, "cmd": kStrings, "oci_platform": kString},
	"health":   {"exec": kStrings, "interval": kString, "timeout": kString, "retries": kInt, "startup_grace": kString},
	"restart":  {"policy": kString, "max_retries": kInt, "max_backoff": kString},
	"auth":     {"ssh_agent": kBool},
	"service":  {"port": kInt, "protocol": kString, "listen": kString},
	"secrets":  {},
}

// Parse reads a Smolfile; name is used in errors.
func Parse(name string, data []byte) (*Smolfile, error) {
	sf := &Smolfile{}
	table := ""
	seen := map[string]bool{}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(stripComment(lines[i]))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			t, err := header(line)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
			}
			table = t
			continue
		}
		key, raw, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: expected key = value", name, lineNo)
		}
		key, raw = strings.TrimSpace(key), strings.TrimSpace(raw)
		for strings.HasPrefix(raw, "[") && !closed(raw) && i+1 < len(lines) {
			i++
			raw += " " + strings.TrimSpace(stripComment(lines[i]))
		}
		k, known := keys[table][key]
		if !known {
			return nil, fmt.Errorf("%s:%d: unknown field `%s`%s", name, lineNo, key, inTable(table))
		}
		if seen[table+"."+key] {
			return nil, fmt.Errorf("%s:%d: duplicate key `%s`%s", name, lineNo, key, inTable(table))
		}
		seen[table+"."+key] = true
		v, err := value(raw, k)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, lineNo, key, err)
		}
		sf.set(table, key, v)
	}
	return sf, nil
}

func inTable(t string) string {
	if t == "" {
		return ""
	}
	return " in [" + t + "]"
}

func header(line string) (string, error) {
	if !strings.HasSuffix(line, "]") || strings.HasPrefix(line, "[[") {
		return "", fmt.Errorf("bad table header %q", line)
	}
	t := strings.TrimSpace(line[1 : len(line)-1])
	if t == "pack" {
		t = "artifact"
	}
	if _, ok := keys[t]; !ok || t == "" {
		return "", fmt.Errorf("unknown table [%s]", t)
	}
	return t, nil
}

// set stores the keys the stand-in uses; [artifact] overrides the top level.
func (sf *Smolfile) set(table, key string, v any) {
	switch table + "." + key {
	case ".image":
		sf.Image = v.(string)
	case ".entrypoint", "artifact.entrypoint":
		sf.Entrypoint = v.([]string)
	case ".cmd", "artifact.cmd":
		sf.Cmd = v.([]string)
	case ".env":
		sf.Env = v.([]string)
	case ".workdir":
		sf.Workdir = v.(string)
	case ".cpus", "artifact.cpus":
		sf.CPUs = v.(int)
	case ".memory", "artifact.memory":
		sf.Memory = v.(int)
	case ".storage":
		sf.Storage = v.(int)
	case ".overlay":
		sf.Overlay = v.(int)
	case ".net":
		sf.Net = v.(bool)
	}
}

// stripComment drops a # comment that is outside quotes.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return s[:i]
		}
	}
	return s
}

// closed reports whether an array value has its closing bracket.
func closed(s string) bool { return strings.HasSuffix(strings.TrimSpace(stripComment(s)), "]") }

func value(raw string, k kind) (any, error) {
	switch k {
	case kString:
		s, rest, err := str(raw)
		if err == nil && strings.TrimSpace(rest) != "" {
			err = fmt.Errorf("unexpected %q after the string", rest)
		}
		return s, err
	case kInt:
		n, err := strconv.Atoi(strings.ReplaceAll(raw, "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("expected a non-negative integer, got %q", raw)
		}
		return n, nil
	case kBool:
		switch raw {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("expected true or false, got %q", raw)
	}
	return strs(raw)
}

// strs parses an array of strings (a trailing comma is allowed).
func strs(raw string) ([]string, error) {
	if !strings.HasPrefix(raw, "[") || !strings.HasSuffix(raw, "]") {
		return nil, fmt.Errorf("expected an array of strings, got %q", raw)
	}
	rest := strings.TrimSpace(raw[1 : len(raw)-1])
	out := []string{}
	for rest != "" {
		s, after, err := str(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		after = strings.TrimSpace(after)
		if after == "" {
			break
		}
		if after[0] != ',' {
			return nil, fmt.Errorf("expected ',' between array items, got %q", after)
		}
		rest = strings.TrimSpace(after[1:])
	}
	return out, nil
}

// str parses one basic ("...") or literal ('...') string at the start of s.
func str(s string) (string, string, error) {
	if s == "" || (s[0] != '"' && s[0] != '\'') {
		return "", "", fmt.Errorf("expected a quoted string, got %q", s)
	}
	q := s[0]
	if q == '\'' {
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "", fmt.Errorf("unterminated string %q", s)
		}
		return s[1 : end+1], s[end+2:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 >= len(s) {
				return "", "", fmt.Errorf("unterminated string %q", s)
			}
			i++
			e, ok := map[byte]byte{'"': '"', '\\': '\\', 'n': '\n', 't': '\t', 'r': '\r'}[s[i]]
			if !ok {
				return "", "", fmt.Errorf("unsupported escape \\%c", s[i])
			}
			b.WriteByte(e)
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated string %q", s)
}
