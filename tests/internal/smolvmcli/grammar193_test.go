package smolvmcli

import (
	"errors"
	"strings"
	"testing"
)

// TestGrammarsDiffer runs each command line against both releases: the
// additions of 1.9.3 parse there and are refused by 1.0.4; what 1.0.4
// refuses for its own reasons, 1.9.3 refuses too.
func TestGrammarsDiffer(t *testing.T) {
	tests := []struct {
		argv     string
		v104     string // "" = accepted, else part of the usage error
		v193     string
		command  string
		trailing string
	}{
		{"machine create --name box --from /a -p 2222:22 --net --allow-host api.example.com", "", "", "machine create", ""},
		{"machine create --name box --from /a --net --outbound-localhost-only", "", "", "machine create", ""},
		{"machine create --name b --image i --label hermes-box=1 --dns 1.1.1.1", "unexpected argument '--label'", "", "machine create", ""},
		{"machine cp --mode 0755 /h/f box:/g/f", "unexpected argument '--mode'", "", "machine cp", ""},
		{"machine exec -d --name box -- sleep 9", "unexpected argument '-d'", "", "machine exec", "sleep 9"},
		{"machine exec -d -i --name box -- sh", "unexpected argument '-d'", "cannot be used with", "", ""},
		{"machine exec -n box -- true", "unexpected argument '-n'", "unexpected argument '-n'", "", ""},
		{"machine delete --name box -f --cascade", "unexpected argument '--cascade'", "", "machine delete", ""},
		{"machine egress-events --name box --json", "unrecognized subcommand 'egress-events'", "", "machine egress-events", ""},
		{"machine start --name box --fork-pool-size 2", "unexpected argument '--fork-pool-size'", "", "machine start", ""},
		{"machine update --name b --rosetta --no-rosetta", "unexpected argument '--rosetta'", "cannot be used with", "", ""},
		{"pack create --from-vm b --rebase-from-image -o out", "unexpected argument '--rebase-from-image'", "", "pack create", ""},
		{"machine create --name b -p 127.0.0.1:2222:22", "invalid port mapping", "invalid port mapping", "", ""},
	}
	for _, tt := range tests {
		for _, rv := range []struct{ release, want string }{{V104, tt.v104}, {V193, tt.v193}} {
			in, err := ParseFor(rv.release, strings.Fields(tt.argv))
			if rv.want != "" {
				var ue *UsageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), rv.want) {
					t.Errorf("%s %q: %v, want a usage error with %q", rv.release, tt.argv, err, rv.want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %q: %v", rv.release, tt.argv, err)
				continue
			}
			if in.Command.Name() != tt.command || strings.Join(in.Trailing, " ") != tt.trailing {
				t.Errorf("%s %q: parsed as %+v", rv.release, tt.argv, in)
			}
		}
	}
	if len(Commands) == len(Commands193) || Commands[0].flag("label") != nil {
		t.Error("building the 1.9.3 grammar changed 1.0.4's")
	}
	if in, err := ParseFor(V125, strings.Fields("machine resume --name box")); err != nil || in.Command.Name() != "machine resume" {
		t.Errorf("1.25 resume: %v", err)
	}
	if _, err := ParseFor(V193, strings.Fields("machine pause --name box")); err == nil {
		t.Error("1.9.3 has machine pause")
	}
	if _, err := ParseFor("1.8.3", []string{"--version"}); err == nil {
		t.Error("an unknown release has a grammar")
	}
}
