package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run runs the stand-in's CLI in-process against a fresh state dir.
func run(t *testing.T, state string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("SMOLVM_QEMU_STATE", state)
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestGrammar(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--version"}, 0, "smolvm 1.0.4\n"},
		{[]string{}, 2, "requires a subcommand"},
		{[]string{"machine", "frobnicate"}, 2, "error: unrecognized subcommand 'frobnicate'"},
		{[]string{"machine", "exec", "-n", "x", "--", "true"}, 2, "error: unexpected argument '-n' found"},
		{[]string{"machine", "exec", "--name", "x"}, 2, "<COMMAND>..."},
		{[]string{"machine", "exec", "--name", "x", "--timeout", "soon", "--", "true"}, 2, "invalid value 'soon' for '--timeout <TIMEOUT>'"},
		{[]string{"machine", "create", "--name", "x", "--name", "y"}, 2, "the argument '--name <NAME>' cannot be used multiple times"},
		{[]string{"machine", "create", "--name"}, 2, "a value is required for '--name <NAME>'"},
		{[]string{"machine", "create", "--name", "x", "--cpus", "many"}, 2, "invalid value 'many' for '--cpus <CPUS>'"},
		{[]string{"machine", "create", "--name", "x", "--image", "i", "--from", "f"}, 2, "error: the argument '--from' cannot be used with '--image'"},
		{[]string{"machine", "create", "--name", "x", "-p", "0:22"}, 2, "error: invalid value '0:22' for '--port <PORT>'"},
		{[]string{"machine", "create", "--name", "x", "-p", "22:22", "-p", "22:23"}, 1, "duplicate host port 22"},
		{[]string{"machine", "create", "--name", "x", "-p", "1:2:3"}, 2, "invalid value '1:2:3' for '--port <PORT>': invalid port mapping"},
		{[]string{"machine", "create", "--name", "x", "-e", "NOVALUE"}, 2, "invalid value 'NOVALUE' for '--env <ENV>': expected KEY=VALUE"},
		{[]string{"machine", "create", "--name", "x", "--secret-env", "G="}, 1, "expected GUEST_VAR=HOST_VAR"},
		{[]string{"machine", "create", "--name", "x", "--net-backend", "tsi", "-p", "8080"}, 1, "published ports require the virtio-net backend"},
		{[]string{"machine", "create", "--name", "x", "--net-backend", "virtio-net"}, 1, "requires --net"},
		{[]string{"machine", "create", "--name", "x", "--net-backend", "slirp"}, 2, "possible values: tsi, virtio-net"},
		{[]string{"machine", "create", "--name", "bad/name"}, 1, "invalid machine name"},
		{[]string{"machine", "status", "--name", "nope", "--json"}, 1, "Error: config operation failed: machine status: machine 'nope' not found\n"},
		{[]string{"machine", "start", "--name", "nope"}, 1, "Error: vm not found: nope\n"},
		{[]string{"machine", "delete", "--force"}, 2, "required arguments were not provided:\n  --name <NAME>"},
		{[]string{"machine", "data-dir", "--name", "nope"}, 1, "vm not found: nope"},
		{[]string{"machine", "cp", "a", "b"}, 1, "exactly one of SRC and DST must be NAME:/path"},
		{[]string{"machine", "cp", "a"}, 2, "required arguments were not provided"},
		{[]string{"machine", "update", "--name", "nope", "--net"}, 1, "Error: config operation failed: update: machine 'nope' not found"},
		{[]string{"pack", "create", "--from-vm", "x"}, 2, "--output <OUTPUT>"},
		{[]string{"pack", "push", "x"}, 2, "error: unrecognized subcommand 'push'"},
		// 1.0.4 accepts these; the stand-in refuses what it does not implement.
		{[]string{"machine", "create", "--name", "x", "--gpu"}, 1, "Error: config operation failed: the QEMU stand-in does not support --gpu on 'smolvm machine create'"},
		{[]string{"machine", "exec", "--name", "x", "-it", "--", "true"}, 1, "does not support --tty"},
		{[]string{"machine", "create", "--name", "x", "--cpus", "0"}, 2, "invalid value '0' for '--cpus <CPUS>'"},
		{[]string{"machine", "exec", "--name", "x", "--timeout", "0s", "--", "true"}, 2, "expected a positive duration"},
		{[]string{"pack", "create", "-o", "out"}, 1, "packs only --from-vm machines"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			state := t.TempDir()
			code, out, errOut := run(t, state, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, tt.code, tt.want)
			}
			if ents, _ := os.ReadDir(state); tt.code != 0 && len(ents) != 0 {
				t.Fatalf("a refused command left state: %v", ents)
			}
		})
	}
}

func TestCreateWithoutImageDirLeavesNothing(t *testing.T) {
	state := t.TempDir()
	t.Setenv("SMOLVM_QEMU_IMAGE", filepath.Join(t.TempDir(), "missing"))
	code, _, errOut := run(t, state, "machine", "create", "--name", "b", "--image", "ubuntu:24.04")
	if code != 1 || !strings.Contains(errOut, "SMOLVM_QEMU_IMAGE") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Fatalf("state left: %v", ents)
	}
	code, out, _ := run(t, state, "machine", "ls", "--json")
	var list []any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 0 {
		t.Fatalf("ls --json: exit %d %q", code, out)
	}
}
