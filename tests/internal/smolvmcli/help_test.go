package smolvmcli

import (
	"strings"
	"testing"
)

// TestHelp: --help anywhere among the options is answered before any
// other check (a required flag may be missing), and the help lists every
// flag of the subcommand in clap's layout, but those a broken profile
// omits.
func TestHelp(t *testing.T) {
	in, err := ParseFor(V193, strings.Fields("machine delete --help"))
	if err != nil || !in.Help || in.Command.Name() != "machine delete" {
		t.Fatalf("machine delete --help: %+v %v", in, err)
	}
	if in, err := ParseFor(V104, strings.Fields("machine exec --name b -- ls --help")); err != nil || in.Help {
		t.Errorf("--help after -- belongs to the command: %+v %v", in, err)
	}
	for _, c := range Commands193 {
		help := Help(&c)
		for _, fl := range c.Flags {
			if !strings.Contains(help, "--"+fl.Long) {
				t.Errorf("%s help lacks --%s", c.Name(), fl.Long)
			}
		}
	}
	c := Commands[0]
	help := Help(&c, "net-backend")
	if strings.Contains(help, "--net-backend") || !strings.Contains(help, "  -n, --name <NAME>\n") || !strings.Contains(help, "      --net\n") {
		t.Errorf("machine create help:\n%s", help)
	}
}
