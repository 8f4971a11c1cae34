package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/secrets"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func secretsRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	pw := fmt.Sprintf("root:x:0:0::/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/bash\n", os.Getuid(), os.Getgid())
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(pw), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/group"), []byte(fmt.Sprintf("hermes:x:%d:\n", os.Getgid())), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestSecretsVerbThroughTheRelay sends secrets after the request line, as
// the host does at every start: the files hold them, the output and the
// events hold names only, and the gateway's table entry reads the file.
func TestSecretsVerbThroughTheRelay(t *testing.T) {
	root := secretsRoot(t)
	const value = "sk-relay-secret-'$x"
	var in bytes.Buffer
	if err := protocol.WriteRequest(&in, protocol.Request{ProtocolVersion: protocol.Version, Argv: []string{"secrets", "set"},
		Options: protocol.Options{Stdin: true}}); err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(protocol.Secrets{Env: map[string]string{"OPENAI_API_KEY": value}})
	in.Write(doc)
	code, out, errs := run(t, in.String(), "--root", root, "relay")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out+errs, "sk-relay") {
		t.Fatal("the value was echoed")
	}
	var res secretsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || !reflect.DeepEqual(res.Names, []string{"OPENAI_API_KEY"}) || res.GatewayRestarted {
		t.Fatalf("result %s (%v)", out, err)
	}
	got, err := secrets.Load(filepath.Join(root, secrets.RootFile))
	if err != nil || !reflect.DeepEqual(got, []string{"OPENAI_API_KEY=" + value}) {
		t.Fatalf("root file: %q %v", got, err)
	}
	progs, err := boot.BoxTable(boot.BoxOptions{}).Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if p.Name != boxlayout.HermesService {
			if p.EnvFrom != nil {
				t.Errorf("%s gets the secrets", p.Name)
			}
			continue
		}
		env, err := p.EnvFrom()
		if err != nil || !reflect.DeepEqual(env, []string{"OPENAI_API_KEY=" + value}) {
			t.Errorf("the gateway's environment from the table: %q %v", env, err)
		}
	}
}

func TestSecretsVerbRefuses(t *testing.T) {
	root := secretsRoot(t)
	for _, c := range []struct{ doc, want string }{
		{`{"env":{"PATH":"/evil"}}`, "is reserved"},
		{`{"env":{"A":"x"}} {}`, "trailing data"},
		{`{"env":{"A":"sk-\u0000"}}`, "empty or contains NUL"},
		{`["sk-list-value"]`, "not a JSON object"},
		{strings.Repeat(" ", protocol.MaxSecretsBytes+1), "larger than"},
	} {
		var in bytes.Buffer
		_ = protocol.WriteRequest(&in, protocol.Request{ProtocolVersion: protocol.Version, Argv: []string{"secrets", "set"},
			Options: protocol.Options{Stdin: true}})
		code, out, errs := run(t, in.String()+c.doc, "--root", root, "relay")
		if code == 0 || !strings.Contains(errs, c.want) || strings.Contains(out+errs, "sk-") {
			t.Errorf("%.40q: exit %d, %s", c.doc, code, errs)
		}
		if _, err := os.Stat(filepath.Join(root, secrets.RootFile)); err == nil {
			t.Errorf("%.40q: a secrets file was written", c.doc)
		}
	}
}
