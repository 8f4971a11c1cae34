package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxLineBytes bounds one line of a configuration file.
const maxLineBytes = 1 << 20

// Assignment is one KEY=VALUE line of a configuration file.
type Assignment struct {
	Key   string // a valid variable name: [A-Za-z_][A-Za-z0-9_]*
	Value string // the value with quotes and comments removed
	Line  int    // 1-based line the assignment is on
}

// String formats a as a line that Parse reads back to the same Key and Value.
// The value is always double-quoted with Go escapes.
func (a Assignment) String() string {
	return a.Key + "=" + strconv.Quote(a.Value)
}

// Parse reads the assignments of a hermes-box.conf style file, in order, and
// executes nothing. name identifies the file in errors. Per line:
//
//   - surrounding whitespace is ignored; blank lines and lines starting with
//     "#" are skipped;
//   - a leading "export " is dropped;
//   - the line must be KEY=VALUE with a valid variable name before the first
//     "="; spaces around the "=" are allowed;
//   - a value in single quotes is taken literally up to the next "'";
//   - a value in double quotes is decoded with Go escape rules
//     (strconv.Unquote);
//   - after a closing quote only whitespace and a "#" comment may follow;
//   - an unquoted value ends before the first "#" that follows a space or
//     tab, so "a#b" keeps its "#b", and is then trimmed.
//
// Every other line, such as shell commands, is an *Error naming the line.
// Parse stops at the first malformed line. It does not know which keys exist;
// Load does.
func Parse(r io.Reader, name string) ([]Assignment, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLineBytes)
	var out []Assignment
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		a, ok, err := parseLine(text)
		if err != nil {
			return nil, &Error{File: name, Line: line, Key: a.Key, Msg: err.Error()}
		}
		if ok {
			a.Line = line
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{File: name, Line: line + 1, Msg: "line too long"}
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return out, nil
}

// parseLine parses one line. ok is false for blank and comment lines. When
// the name is valid but the value is not, a.Key is set along with err.
func parseLine(text string) (a Assignment, ok bool, err error) {
	text = strings.TrimSpace(text)
	if text == "" || text[0] == '#' {
		return a, false, nil
	}
	if rest, found := strings.CutPrefix(text, "export "); found {
		text = strings.TrimSpace(rest)
	}
	eq := strings.IndexByte(text, '=')
	if eq < 1 {
		return a, false, errors.New("expected KEY=VALUE assignment")
	}
	key := strings.TrimSpace(text[:eq])
	if !validName(key) {
		return a, false, fmt.Errorf("invalid variable name %q", key)
	}
	a.Key = key
	a.Value, err = parseValue(text[eq+1:])
	if err != nil {
		return a, false, fmt.Errorf("%w for %q", err, key)
	}
	return a, true, nil
}

// parseValue decodes the text after the "=" of an assignment.
func parseValue(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '\'':
		end := strings.IndexByte(v[1:], '\'') + 1
		if end == 0 {
			return "", errors.New("unterminated single-quoted value")
		}
		return v[1:end], checkAfterQuote(v[end+1:])
	case '"':
		end := closingDoubleQuote(v)
		if end < 0 {
			return "", errors.New("unterminated double-quoted value")
		}
		if err := checkAfterQuote(v[end+1:]); err != nil {
			return "", err
		}
		s, err := strconv.Unquote(v[:end+1])
		if err != nil {
			return "", errors.New("invalid escape sequence in double-quoted value")
		}
		return s, nil
	}
	return stripComment(raw), nil
}

// closingDoubleQuote returns the index of the quote that closes the
// double-quoted string at the start of v, or -1.
func closingDoubleQuote(v string) int {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// checkAfterQuote accepts only whitespace and a comment after a closing quote.
func checkAfterQuote(rest string) error {
	rest = strings.TrimSpace(rest)
	if rest == "" || rest[0] == '#' {
		return nil
	}
	return errors.New("unexpected text after closing quote")
}

// stripComment cuts an unquoted value before the first "#" that follows a
// space or tab, then trims it.
func stripComment(raw string) string {
	for i := 1; i < len(raw); i++ {
		if raw[i] == '#' && (raw[i-1] == ' ' || raw[i-1] == '\t') {
			raw = raw[:i]
			break
		}
	}
	return strings.TrimSpace(raw)
}

// validName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
