package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestExecutorConnectHermesThroughRelay(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "workspace/hermes-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model: x # mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var req bytes.Buffer
	err := protocol.WriteRequest(&req, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"executor", "connect-hermes"}, Options: protocol.Options{Stdin: true}})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, req.String()+"exk_secret-1\n", "--root", root, "relay")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out+errs, "exk_secret-1") {
		t.Fatal("the key was echoed")
	}
	env, _ := os.ReadFile(filepath.Join(home, ".env"))
	if string(env) != "MCP_EXECUTOR_API_KEY=exk_secret-1\n" {
		t.Fatalf(".env = %q", env)
	}
	cfg, _ := os.ReadFile(filepath.Join(home, "config.yaml"))
	if !strings.HasPrefix(string(cfg), "model: x # mine\nmcp_servers:\n  executor:\n") || !strings.Contains(string(cfg), "Bearer ${MCP_EXECUTOR_API_KEY}") {
		t.Fatalf("config.yaml = %s", cfg)
	}
}

func TestExecutorConnectHermesRefusesEmptyKey(t *testing.T) {
	root := t.TempDir()
	code, _, errs := run(t, "\n", "--root", root, "executor", "connect-hermes")
	if code != 2 || !strings.Contains(errs, "empty") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(root, "workspace/hermes-home/.env")); err == nil {
		t.Fatal(".env written for an empty key")
	}
}

func TestExecutorStatusWithoutReleases(t *testing.T) {
	code, out, errs := run(t, "", "--root", t.TempDir(), "executor", "status", "--sizes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res executorStatusResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Current != nil || res.RuntimeBytes == nil || *res.RuntimeBytes != 0 {
		t.Fatalf("got %s (%v)", out, err)
	}
}

func TestExecutorUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"executor"}, "want a subcommand"},
		{[]string{"executor", "frob"}, "unknown subcommand"},
		{[]string{"executor", "pull", "--image", "ghcr.io/x/y:latest"}, "@sha256"},
		{[]string{"executor", "activate", "--image", "ghcr.io/x/y@sha256:" + strings.Repeat("a", 64)}, "TAG"},
		{[]string{"executor", "logs", "-n", "-1"}, "negative"},
	}
	for _, tt := range tests {
		code, _, errs := run(t, "", append([]string{"--root", t.TempDir()}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d: %s", tt.args, code, errs)
		}
	}
}

func TestExecutorLogsTail(t *testing.T) {
	root := t.TempDir()
	p := executorPathsFor(root).log
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "", "--root", root, "executor", "logs", "-n", "2")
	if code != 0 || out != "b\nc\n" {
		t.Fatalf("exit %d out %q: %s", code, out, errs)
	}
}
