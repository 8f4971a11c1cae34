package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// run invokes the agent's command line in-process.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func request(argv ...string) string {
	var b bytes.Buffer
	if err := protocol.WriteRequest(&b, protocol.Request{ProtocolVersion: protocol.Version, Argv: argv}); err != nil {
		panic(err)
	}
	return b.String()
}

func TestRelayRunsHealth(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "workspace"), 0o750); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, request("health", "--json"), "--root", root, "relay")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r, err := health.Decode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.System.Workspace.Path != filepath.Join(root, "workspace") {
		t.Fatalf("workspace %q", r.System.Workspace.Path)
	}
}

func TestRelayRefuses(t *testing.T) {
	tests := []struct {
		name, stdin, want string
	}{
		{"verb not allowed", request("hostkeys"), `verb \"hostkeys\" is not allowed through the relay`},
		{"relay through relay", request("relay"), "not allowed through the relay"},
		{"unknown verb", request("rm", "-rf", "/"), `verb \"rm\" is not allowed`},
		{"wrong version", `{"protocolVersion":99,"argv":["health"]}` + "\n", "unsupported protocol version"},
		{"shell text", "health --json; touch /tmp/x\n", "decoding request"},
		{"no request", "", "reading request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(t, tt.stdin, "--root", t.TempDir(), "relay")
			if code != 2 || out != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			ev, err := protocol.DecodeEvent([]byte(strings.TrimSpace(errs)))
			if err != nil || ev.Level != protocol.LevelError || !strings.Contains(errs, tt.want) {
				t.Fatalf("stderr %q (%v), want an error event containing %q", errs, err, tt.want)
			}
		})
	}
}

func TestHostkeysVerb(t *testing.T) {
	root := t.TempDir()
	code, out, errs := run(t, "", "--root", root, "hostkeys")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var keys protocol.HostKeys
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys.Keys) != 1 || !strings.HasPrefix(keys.Keys[0].Fingerprint, "SHA256:") {
		t.Fatalf("got %q (%v)", out, err)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no verb", nil, 2},
		{"unknown verb", []string{"frobnicate"}, 2},
		{"bad flag", []string{"health", "--nope"}, 2},
		{"extra args", []string{"version", "extra"}, 2},
		{"version", []string{"version"}, 0},
		{"help", []string{"-h"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _, errs := run(t, "", tt.args...); code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errs)
			}
		})
	}
}

// Every verb's --help (and -h) prints its usage and exits 0 without an
// error event.
func TestEveryVerbHelp(t *testing.T) {
	for _, v := range Verbs() {
		name := v.name
		for _, flag := range []string{"--help", "-h"} {
			t.Run(name+flag, func(t *testing.T) {
				code, _, errs := run(t, "", "--root", t.TempDir(), name, flag)
				if code != 0 || !strings.Contains(errs, "usage: hermes-box-agent "+name) || strings.Contains(errs, `"level":"error"`) {
					t.Fatalf("exit %d, stderr:\n%s", code, errs)
				}
			})
		}
	}
}
