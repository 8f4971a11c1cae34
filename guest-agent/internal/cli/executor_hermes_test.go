package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/mcp/mcptest"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// These run in both builds: the lean agent links Hermes to Executor
// itself, without its Executor helper.

// accountsRoot is a box root whose hermes account is the test's own user.
func accountsRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	for name, body := range map[string]string{
		"etc/passwd": fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/sh\n", uid, gid),
		"etc/group":  fmt.Sprintf("root:x:0:\nhermes:x:%d:\n", gid),
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// executorStandins serves a stand-in Executor MCP endpoint that accepts
// key, and installs the stand-in `hermes` (its `mcp test` probes the
// configured server as Hermes does) under root.
func executorStandins(t *testing.T, root, key string) *mcptest.Server {
	t.Helper()
	srv := mcptest.New(key, true)
	t.Cleanup(srv.Close)
	b, err := os.ReadFile(filepath.Join("..", "executor", "hermeslink", "testdata", "hermes-standin.py"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "usr/local/bin/hermes")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return srv
}

// hermesHome is the box's HERMES_HOME under root, with config.yaml cfg.
func hermesHome(t *testing.T, root, cfg string) string {
	t.Helper()
	home := filepath.Join(root, "workspace/hermes-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func TestExecutorConnectHermesThroughRelay(t *testing.T) {
	root := accountsRoot(t)
	srv := executorStandins(t, root, "exk_secret-1")
	home := hermesHome(t, root, "model: x # mine\n")
	var req bytes.Buffer
	err := protocol.WriteRequest(&req, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"executor", "connect-hermes", "--mcp-url", srv.MCPURL()}, Options: protocol.Options{Stdin: true}})
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

// TestExecutorConnectHermesWarnsOfTheGate: the gate check connect-hermes
// runs on the files it changed finds a gate that is not as provisioned
// (here a tree whose source edits are gone): connect-hermes succeeds, and
// says so in a warning.
func TestExecutorConnectHermesWarnsOfTheGate(t *testing.T) {
	root := accountsRoot(t)
	srv := executorStandins(t, root, "exk_secret-4")
	hermesHome(t, root, "model: x # mine\n")
	tree := filepath.Join(root, boxlayout.HermesTree)
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := patch.WriteSourceMarker(tree, pins.DefaultHermesCommit); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "exk_secret-4\n", "--root", root, "executor", "connect-hermes", "--mcp-url", srv.MCPURL())
	if code != 0 || !strings.Contains(out, `"mcpServer": "executor"`) {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	var gateWarning bool
	for line := range strings.Lines(errs) {
		ev, err := protocol.DecodeEvent([]byte(line))
		gateWarning = gateWarning || err == nil && ev.Type == protocol.EventWarning &&
			strings.Contains(ev.Message, "approval gate of Hermes") && strings.Contains(ev.Message, "source edits are not in place")
	}
	if !gateWarning {
		t.Fatalf("no warning that the gate is not as provisioned:\n%s", errs)
	}
}

// TestExecutorConnectHermesRollsBack: when Hermes' own `mcp test` cannot
// reach Executor, connect-hermes fails and Hermes' files are as they were.
func TestExecutorConnectHermesRollsBack(t *testing.T) {
	root := accountsRoot(t)
	srv := executorStandins(t, root, "exk_secret-3")
	hermes := filepath.Join(root, "usr/local/bin/hermes")
	if err := os.WriteFile(hermes, []byte("#!/bin/sh\necho '  ✗ Connection failed (1ms): refused'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const cfg = "model: x # mine\n"
	home := hermesHome(t, root, cfg)
	code, out, errs := run(t, "exk_secret-3\n", "--root", root, "executor", "connect-hermes", "--mcp-url", srv.MCPURL())
	if code != 1 || !strings.Contains(errs, "no connection to Executor") || !strings.Contains(errs, "Hermes' configuration is as it was") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if got, _ := os.ReadFile(filepath.Join(home, "config.yaml")); string(got) != cfg {
		t.Fatalf("config.yaml = %q", got)
	}
	if _, err := os.Stat(filepath.Join(home, ".env")); err == nil {
		t.Fatal(".env left behind")
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

// TestExecutorConnectHermesRestartsTheGateway: with boot running,
// connect-hermes restarts the gateway through the control socket.
func TestExecutorConnectHermesRestartsTheGateway(t *testing.T) {
	root, table := bootRoot(t, freeAddr(t))
	srv := executorStandins(t, root, "exk_secret-2")
	cmd, stderr := startBoot(t, root, table)
	before := waitServices(t, root, "both programs RUNNING", bothRunning)["hermes"]
	var req bytes.Buffer
	if err := protocol.WriteRequest(&req, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"executor", "connect-hermes", "--mcp-url", srv.MCPURL()}, Options: protocol.Options{Stdin: true}}); err != nil {
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
