package smolvmcli

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		argv     string
		command  string
		check    func(*Invocation) bool
		trailing string
	}{
		{"machine create --name b --image ubuntu:24.04 --cpus 4 --mem 8192 --storage 15 --overlay 6 --net --net-backend virtio-net", "machine create",
			func(in *Invocation) bool { return in.Value("net-backend") == "virtio-net" && in.Bools["net"] }, ""},
		{"vm create -n box --from /a.smolmachine -p 2222:22 -p 4788 -e A=1 -e B= --secret-env K=H --net", "machine create",
			func(in *Invocation) bool { return len(in.Values["port"]) == 2 && len(in.Values["env"]) == 2 }, ""},
		{"machine create --name w --image alpine -- sleep infinity", "machine create", nil, "sleep infinity"},
		{"machine exec --stream -i --name box --timeout 5s -- /usr/local/sbin/hermes-box-agent relay", "machine exec",
			func(in *Invocation) bool { return in.Bools["interactive"] && in.Bools["stream"] }, "/usr/local/sbin/hermes-box-agent relay"},
		{"machine exec --name box ls -la", "machine exec", nil, "ls -la"},
		{"machine exec -it --name=box -- sh", "machine exec", func(in *Invocation) bool { return in.Bools["tty"] }, "sh"},
		{"machine rm --name box -f", "machine delete", func(in *Invocation) bool { return in.Bools["force"] }, ""},
		{"machine list --json", "machine ls", nil, ""},
		{"machine status --name box --json", "machine status", nil, ""},
		{"machine cp /h/f box:/g/f", "machine cp", func(in *Invocation) bool { return len(in.Args) == 2 }, ""},
		{"machine update --name b --net", "machine update", nil, ""},
		{"machine data-dir --name b", "machine data-dir", nil, ""},
		{"machine sh --name b", "machine shell", nil, ""},
		{"pack create --from-vm b --smolfile S -o out", "pack create", nil, ""},
	}
	for _, tt := range tests {
		in, err := Parse(strings.Fields(tt.argv))
		if err != nil {
			t.Errorf("%s: %v", tt.argv, err)
			continue
		}
		if in.Command.Name() != tt.command || (tt.check != nil && !tt.check(in)) || strings.Join(in.Trailing, " ") != tt.trailing {
			t.Errorf("%s: parsed as %+v", tt.argv, in)
		}
	}
	if in, err := Parse([]string{"--version"}); err != nil || !in.Version {
		t.Errorf("--version: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ argv, msg string }{
		{"machine exec -n box -- true", "unexpected argument '-n'"},
		{"machine exec --name box", "<COMMAND>"},
		{"machine create --name b --image i sleep", "unexpected argument 'sleep'"},
		{"machine create --name b -p 127.0.0.1:2222:22", "invalid port mapping"},
		{"machine create --name b -p 0:22", "invalid port mapping"},
		{"machine create --name b --cpus four", "invalid value 'four' for '--cpus"},
		{"machine create --name b --net-backend slirp", "possible values"},
		{"machine create --name b --image i --from f", "cannot be used with"},
		{"machine create --name b --bind 127.0.0.1", "unexpected argument '--bind'"},
		{"machine create --name", "a value is required"},
		{"machine create --name a --name b", "cannot be used multiple times"},
		{"machine delete --force", "required arguments"},
		{"machine data-dir", "required arguments"},
		{"machine update --name b --net --no-net", "cannot be used with"},
		{"machine exec --name b --timeout soon -- true", "invalid duration"},
		{"machine cp only-one", "positional"},
		{"machine frob", "unrecognized subcommand 'frob'"},
		{"pack create --from-vm b", "--output"},
		{"", "requires a subcommand"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.Fields(tt.argv))
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "error: ") {
			t.Errorf("%q: %v; want a usage error with %q", tt.argv, err, tt.msg)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("machine exec --stream -i --name box -- agent relay")
	f.Add("machine create -n b -p 1:2 -e=A=b --net")
	f.Fuzz(func(t *testing.T, line string) {
		in, err := Parse(strings.Fields(line))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "error: ") {
				t.Fatalf("error without clap's prefix: %v", err)
			}
			return
		}
		if !in.Version && in.Command == nil {
			t.Fatal("no command and no version")
		}
	})
}
