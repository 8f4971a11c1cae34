package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, never runs anything, and that
// every assignment it accepts has a valid name and survives a round trip
// through Assignment.String.
func FuzzParse(f *testing.F) {
	marker := filepath.Join(f.TempDir(), "marker")
	seeds := []string{
		"",
		"A=1\n# comment\nexport B = 'two' # c\nC=\"three\\n\"\n",
		"touch " + marker,
		"A=$(touch " + marker + ")",
		"A=`touch " + marker + "`",
		"A=\"$(touch " + marker + ")\"",
		"A=1; rm -rf " + marker,
		"A=1 ; touch " + marker + "\n",
		"$(touch " + marker + ")=1",
		"export A='x' ; touch " + marker,
		"A='unterminated",
		"A=\"bad \\q escape\"",
		"A=a#b c #d",
		"=x\n\ufeffA=1\r\n",
		"HERMES_BOX_SSH_PORT=\"\\x32222\"",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Parse(strings.NewReader(in), "fuzz.conf")
		if _, statErr := os.Stat(marker); !errors.Is(statErr, os.ErrNotExist) {
			t.Fatalf("marker exists after Parse(%q) (stat error %v)", in, statErr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "fuzz.conf:") {
				t.Fatalf("Parse(%q) error %q is not a located ErrInvalid", in, err)
			}
			return
		}
		for _, a := range got {
			if !validName(a.Key) {
				t.Fatalf("Parse(%q) accepted invalid name %q", in, a.Key)
			}
			back, err := Parse(strings.NewReader(a.String()), "round-trip.conf")
			if err != nil {
				t.Fatalf("Parse(%q) of accepted %#v: %v", a.String(), a, err)
			}
			if len(back) != 1 || back[0].Key != a.Key || back[0].Value != a.Value {
				t.Fatalf("round trip of %#v through %q gave %#v", a, a.String(), back)
			}
		}
	})
}
