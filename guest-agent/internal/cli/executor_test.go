package cli

import (
	"bytes"
	"encoding/json"
	"github.com/hermes-box/hermes-box/guest-agent/internal/ociverb"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/shared/health"
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
	if !strings.Contains(errs, `"type":"warning"`) || !strings.Contains(errs, "no supervisor is running to restart its gateway") {
		t.Fatalf("no warning that the gateway was not restarted: %s", errs)
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
	var res ociverb.StatusResult
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
		{[]string{"executor", "logs"}, "unknown subcommand"},
		{[]string{"executor", "run", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		code, _, errs := run(t, "", append([]string{"--root", t.TempDir()}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d: %s", tt.args, code, errs)
		}
	}
}

// TestExecutorConnectHermesRestartsTheGateway: with boot running,
// connect-hermes restarts the gateway through the control socket.
func TestExecutorConnectHermesRestartsTheGateway(t *testing.T) {
	root, table := bootRoot(t, freeAddr(t))
	cmd, stderr := startBoot(t, root, table)
	before := waitServices(t, root, "both programs RUNNING", bothRunning)["hermes"]
	var req bytes.Buffer
	if err := protocol.WriteRequest(&req, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"executor", "connect-hermes"}, Options: protocol.Options{Stdin: true}}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, req.String()+"exk_secret-2\n", "--root", root, "relay")
	if code != 0 || strings.Contains(errs, `"type":"warning"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	after := services(t, root)["hermes"]
	if after.State != health.ServiceRunning || after.PID == before.PID || !alive(after.PID) || alive(before.PID) {
		t.Fatalf("gateway before %+v, after %+v: want a new, running process", before, after)
	}
	if env, _ := os.ReadFile(filepath.Join(root, "workspace/hermes-home/.env")); string(env) != "MCP_EXECUTOR_API_KEY=exk_secret-2\n" {
		t.Fatalf(".env = %q", env)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("boot: %v\n%s", err, stderr)
	}
}
