package hermeslink

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/shared/mcp/mcptest"
)

// boxRoot is a box root with a hermes account (the test's own user), a
// Hermes home holding config.yaml (and .env when env is not ""), and
// hermes at usr/local/bin: the stand-in that runs `mcp test` as Hermes
// does, or the given script.
func boxRoot(t *testing.T, cfg, env, hermes string) string {
	t.Helper()
	root := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	if hermes == "" {
		b, err := os.ReadFile(filepath.Join("testdata", "hermes-standin.py"))
		if err != nil {
			t.Fatal(err)
		}
		hermes = string(b)
	}
	files := map[string]string{
		"etc/passwd":                        fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/sh\n", uid, gid),
		"etc/group":                         fmt.Sprintf("root:x:0:\nhermes:x:%d:\n", gid),
		"usr/local/bin/hermes":              hermes,
		"workspace/hermes-home/config.yaml": cfg,
	}
	if env != "" {
		files["workspace/hermes-home/.env"] = env
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "workspace/hermes-home/config.yaml"), 0o640); err != nil {
		t.Fatal(err)
	}
	return root
}

func readHome(t *testing.T, root string) (cfg, env string, envExists bool) {
	t.Helper()
	home := filepath.Join(root, "workspace/hermes-home")
	c, err := os.ReadFile(filepath.Join(home, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.ReadFile(filepath.Join(home, ".env"))
	return string(c), string(e), err == nil
}

const userConfig = "model: x # mine\nmcp_servers:\n  other:\n    url: http://127.0.0.1:9/mcp\n"

func TestConnectSuccess(t *testing.T) {
	srv := mcptest.New("exk_key-1", false)
	defer srv.Close()
	root := boxRoot(t, userConfig, "OTHER=1\n", "")
	restarts := 0
	c := &Connector{Root: root, URL: srv.MCPURL(), HTTP: &http.Client{}, Restart: func(context.Context) error { restarts++; return nil }}
	res, err := c.Connect(t.Context(), "exk_key-1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.GatewayRestarted || restarts != 1 || res.URL != srv.MCPURL() {
		t.Fatalf("result %+v, %d restarts", res, restarts)
	}
	cfg, env, _ := readHome(t, root)
	if env != "OTHER=1\nMCP_EXECUTOR_API_KEY=exk_key-1\n" {
		t.Fatalf(".env = %q", env)
	}
	if !strings.HasPrefix(cfg, "model: x # mine\nmcp_servers:\n  other:\n") || !strings.Contains(cfg, "  executor:\n    url: "+srv.MCPURL()+"\n") {
		t.Fatalf("config.yaml = %s", cfg)
	}
	if _, err := os.Stat(filepath.Join(root, "workspace/hermes-home/mcp-test-standin.json")); err != nil {
		t.Fatal("hermes mcp test did not run")
	}
}

// TestConnectFailuresLeaveHermesAsItWas: whatever fails, config.yaml and
// .env keep their bytes and mode (or stay missing), the gateway is not
// restarted, and the key is in no error.
func TestConnectFailuresLeaveHermesAsItWas(t *testing.T) {
	tests := []struct {
		name      string
		serverKey string
		tools     []string
		hermes    string
		env       string
		want      string
	}{
		{name: "wrong surface", serverKey: "exk_key-1", tools: []string{"execute"}, want: "unexpected Executor MCP surface"},
		{name: "key refused", serverKey: "other", want: "refused the API key"},
		{name: "mcp test cannot connect", serverKey: "exk_key-1", env: "A=1\n",
			hermes: "#!/bin/sh\necho \"  Auth: Authorization: Bear***ey-1\"\necho '  ✗ Connection failed (3ms): [Errno 111] Connection refused'\n",
			want:   "no connection to Executor"},
		{name: "mcp test exits non-zero", serverKey: "exk_key-1", hermes: "#!/bin/sh\necho 'Traceback: exk_key-1' >&2\nexit 1\n", want: "exited with status 1"},
		{name: "mcp test misses a tool", serverKey: "exk_key-1", hermes: "#!/bin/sh\necho '✓ Connected (1ms)'\necho '✓ Tools discovered: 1'\necho '    execute'\n", want: `"resume" tool was not discovered`},
		{name: "server not in Hermes' view", serverKey: "exk_key-1", hermes: "#!/bin/sh\necho \"✗ Server 'executor' not found in config.\"\n", want: "missing from Hermes' configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mcptest.New(tt.serverKey, true)
			if tt.tools != nil {
				srv.Tools = tt.tools
			}
			defer srv.Close()
			root := boxRoot(t, userConfig, tt.env, tt.hermes)
			home := filepath.Join(root, "workspace/hermes-home")
			before, _ := os.Stat(filepath.Join(home, "config.yaml"))
			restarted := false
			c := &Connector{Root: root, URL: srv.MCPURL(), HTTP: &http.Client{}, Restart: func(context.Context) error { restarted = true; return nil }}
			_, err := c.Connect(t.Context(), "exk_key-1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "exk_key-1") || strings.Contains(err.Error(), "ey-1") {
				t.Fatalf("the key leaked into the error: %v", err)
			}
			cfg, env, envExists := readHome(t, root)
			if cfg != userConfig || env != tt.env || envExists != (tt.env != "") || restarted {
				t.Fatalf("after the failure: config %q, .env %q (exists %v), restarted %v", cfg, env, envExists, restarted)
			}
			after, _ := os.Stat(filepath.Join(home, "config.yaml"))
			if after.Mode() != before.Mode() {
				t.Fatalf("config.yaml mode %v, was %v", after.Mode(), before.Mode())
			}
		})
	}
}

func TestConnectWithoutSupervisor(t *testing.T) {
	srv := mcptest.New("exk_key-1", false)
	defer srv.Close()
	root := boxRoot(t, userConfig, "", "")
	c := &Connector{Root: root, URL: srv.MCPURL(), HTTP: &http.Client{}}
	res, err := c.Connect(t.Context(), "exk_key-1")
	if !errors.Is(err, ErrGatewayNotRunning) || !errors.Is(err, control.ErrNotRunning) || res.GatewayRestarted {
		t.Fatalf("got %+v, %v; want the not-running caveat", res, err)
	}
	if _, env, _ := readHome(t, root); env != "MCP_EXECUTOR_API_KEY=exk_key-1\n" {
		t.Fatalf("the configuration was not kept: .env %q", env)
	}
}

func TestMCPTestPassed(t *testing.T) {
	ok := "\x1b[36m  Testing 'executor'...\x1b[0m\n  ✓ Connected (12ms)\n  ✓ Tools discovered: 2\n\n    \x1b[32mexecute\x1b[0m     Run code\n    \x1b[32mresume\x1b[0m   Resume\n"
	if err := mcpTestPassed(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "  ✓ Connected (1ms)\n", "✓ Connected\n✓ Tools discovered: 2\n    executes\n    resume\n"} {
		if mcpTestPassed(bad) == nil {
			t.Errorf("%q passed", bad)
		}
	}
}
