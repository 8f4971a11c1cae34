package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Assignment
	}{
		{"empty input", "", nil},
		{"blank and whitespace lines", "\n   \n\t\n", nil},
		{"comment lines", "# comment\n   # indented comment\n#A=1\n", nil},
		{"plain", "A=1", []Assignment{{"A", "1", 1}}},
		{"line numbers count skipped lines", "# c\n\nA=1\n\nB=2\n", []Assignment{{"A", "1", 3}, {"B", "2", 5}}},
		{"surrounding whitespace", "  \tA=1  \t", []Assignment{{"A", "1", 1}}},
		{"crlf line ending", "A=1\r\nB='x'\r\n", []Assignment{{"A", "1", 1}, {"B", "x", 2}}},
		{"byte order mark", "\ufeffA=1", []Assignment{{"A", "1", 1}}},
		{"export prefix", "export A=1", []Assignment{{"A", "1", 1}}},
		{"export prefix with extra spaces", "export    A=1", []Assignment{{"A", "1", 1}}},
		{"export as a name", "export=1", []Assignment{{"export", "1", 1}}},
		{"spaces around equals", "A = value", []Assignment{{"A", "value", 1}}},
		{"tab around equals", "A\t=\tvalue", []Assignment{{"A", "value", 1}}},
		{"empty value", "A=", []Assignment{{"A", "", 1}}},
		{"empty value with spaces", "A=   ", []Assignment{{"A", "", 1}}},
		{"later equals kept in value", "A=b=c", []Assignment{{"A", "b=c", 1}}},
		{"underscore name", "_a_1=x", []Assignment{{"_a_1", "x", 1}}},
		{"unquoted inner spaces kept", "A=a b  c", []Assignment{{"A", "a b  c", 1}}},
		{"unquoted inline comment", "A=value # comment", []Assignment{{"A", "value", 1}}},
		{"unquoted tab comment", "A=value\t# comment", []Assignment{{"A", "value", 1}}},
		{"unquoted hash inside kept", "A=a#b", []Assignment{{"A", "a#b", 1}}},
		{"unquoted leading hash kept", "A=#b", []Assignment{{"A", "#b", 1}}},
		{"only a comment after equals", "A= # comment", []Assignment{{"A", "", 1}}},
		{"unquoted quote characters kept", `A=a"b'c`, []Assignment{{"A", `a"b'c`, 1}}},
		{"command substitution kept literally", "A=$(touch x)", []Assignment{{"A", "$(touch x)", 1}}},
		{"backticks kept literally", "A=`touch x`", []Assignment{{"A", "`touch x`", 1}}},
		{"variable reference kept literally", "A=${HOME}/x", []Assignment{{"A", "${HOME}/x", 1}}},
		{"single quoted", "A='a b'", []Assignment{{"A", "a b", 1}}},
		{"single quoted empty", "A=''", []Assignment{{"A", "", 1}}},
		{"single quoted no escapes", `A='a\nb\'`, []Assignment{{"A", `a\nb\`, 1}}},
		{"single quoted hash kept", "A='a #b'", []Assignment{{"A", "a #b", 1}}},
		{"single quoted then comment", "A='a' # c", []Assignment{{"A", "a", 1}}},
		{"single quoted then hash", "A='a'#c", []Assignment{{"A", "a", 1}}},
		{"single quoted then spaces", "A='a'   ", []Assignment{{"A", "a", 1}}},
		{"single quoted dollar", "A='$(touch x)'", []Assignment{{"A", "$(touch x)", 1}}},
		{"double quoted", `A="a b"`, []Assignment{{"A", "a b", 1}}},
		{"double quoted empty", `A=""`, []Assignment{{"A", "", 1}}},
		{"double quoted go escapes", `A="a\tb\n\x41\u00e9\\"`, []Assignment{{"A", "a\tb\nA\u00e9\\", 1}}},
		{"double quoted escaped quote", `A="say \"hi\""`, []Assignment{{"A", `say "hi"`, 1}}},
		{"double quoted hash kept", `A="a #b"`, []Assignment{{"A", "a #b", 1}}},
		{"double quoted then comment", `A="a" # c "d"`, []Assignment{{"A", "a", 1}}},
		{"double quoted dollar", `A="$(touch x)"`, []Assignment{{"A", "$(touch x)", 1}}},
		{"export with spaces and quotes", `export A = "v" # c`, []Assignment{{"A", "v", 1}}},
		{"duplicates kept in order", "A=1\nA=2", []Assignment{{"A", "1", 1}, {"A", "2", 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in), "test.conf")
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"shell command", "touch /tmp/x", "test.conf:1: expected KEY=VALUE assignment"},
		{"missing equals", "A", "test.conf:1: expected KEY=VALUE assignment"},
		{"empty key", "=value", "test.conf:1: expected KEY=VALUE assignment"},
		{"empty key with spaces", "  = value", "test.conf:1: expected KEY=VALUE assignment"},
		{"export without assignment", "export A", "test.conf:1: expected KEY=VALUE assignment"},
		{"export empty key", "export =v", "test.conf:1: expected KEY=VALUE assignment"},
		{"bare export", "export", "test.conf:1: expected KEY=VALUE assignment"},
		{"line number of the bad line", "A=1\n\n# c\nrm -rf /", "test.conf:4: expected KEY=VALUE assignment"},
		{"name starts with digit", "1A=x", `test.conf:1: invalid variable name "1A"`},
		{"name with dash", "A-B=x", `test.conf:1: invalid variable name "A-B"`},
		{"name with space", "A B=x", `test.conf:1: invalid variable name "A B"`},
		{"name with dollar", "$A=x", `test.conf:1: invalid variable name "$A"`},
		{"command then assignment", "touch x; A=1", `test.conf:1: invalid variable name "touch x; A"`},
		{"export with tab", "export\tA=1", `test.conf:1: invalid variable name "export\tA"`},
		{"append operator", "A+=1", `test.conf:1: invalid variable name "A+"`},
		{"unterminated single quote", "A='abc", `test.conf:1: unterminated single-quoted value for "A"`},
		{"unterminated double quote", `A="abc`, `test.conf:1: unterminated double-quoted value for "A"`},
		{"escaped closing double quote", `A="abc\"`, `test.conf:1: unterminated double-quoted value for "A"`},
		{"text after single quote", "A='a'b", `test.conf:1: unexpected text after closing quote for "A"`},
		{"command after single quote", "A='a'; touch x", `test.conf:1: unexpected text after closing quote for "A"`},
		{"text after double quote", `A="a" b`, `test.conf:1: unexpected text after closing quote for "A"`},
		{"second quoted word", `A="a""b"`, `test.conf:1: unexpected text after closing quote for "A"`},
		{"unknown go escape", `A="\q"`, `test.conf:1: invalid escape sequence in double-quoted value for "A"`},
		{"shell escaped single quote", `A="\'"`, `test.conf:1: invalid escape sequence in double-quoted value for "A"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in), "test.conf")
			if err == nil {
				t.Fatalf("Parse(%q) = %#v, want error %q", tt.in, got, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("Parse(%q) error = %q, want %q", tt.in, err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) error %v does not match ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestParseLongLine(t *testing.T) {
	in := "A=1\nB=" + strings.Repeat("x", maxLineBytes) + "\n"
	_, err := Parse(strings.NewReader(in), "test.conf")
	if err == nil || err.Error() != "test.conf:2: line too long" {
		t.Errorf("Parse(long line) error = %v, want test.conf:2: line too long", err)
	}
}

// TestParseRunsNothing checks that shell code is rejected with its line and
// that nothing it names happens.
func TestParseRunsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "x")
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"touch command", "A=1\ntouch " + marker, "test.conf:2: expected KEY=VALUE assignment"},
		{"assignment then command", "A=1 ; touch " + marker, ""},
		{"command substitution", "A=$(touch " + marker + ")", ""},
		{"backticks", "A=`touch " + marker + "`", ""},
		{"double quoted substitution", `A="$(touch ` + marker + `)"`, ""},
		{"and list", "A=1 && touch " + marker, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in), "test.conf")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Parse(%q) error: %v", tt.in, err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("marker %s exists after Parse(%q) (stat error %v)", marker, tt.in, err)
			}
		})
	}
}

func TestAssignmentStringRoundTrip(t *testing.T) {
	values := []string{"", "plain", "a b", `quote " and \ backslash`, "'single'", "tab\tnewline\n", "# hash", "$(x)", "\xff\x00", "é"}
	for _, v := range values {
		t.Run(v, func(t *testing.T) {
			a := Assignment{Key: "K", Value: v, Line: 1}
			got, err := Parse(strings.NewReader(a.String()), "test.conf")
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", a.String(), err)
			}
			if want := []Assignment{a}; !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q) = %#v, want %#v", a.String(), got, want)
			}
		})
	}
}
