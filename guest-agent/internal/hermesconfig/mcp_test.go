package hermesconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetMCPServerMergesNodes(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"missing file", "", "mcp_servers:\n  executor:\n    url: http://127.0.0.1:4788/mcp\n    headers:\n      Authorization: Bearer ${MCP_EXECUTOR_API_KEY}\n    enabled: true\n"},
		{"keeps other keys and comments",
			"# my config\nmodel: gpt # inline\nmcp_servers:\n  github:\n    command: npx # keep\n  executor:\n    url: http://old\n",
			"# my config\nmodel: gpt # inline\nmcp_servers:\n  github:\n    command: npx # keep\n  executor:\n    url: http://127.0.0.1:4788/mcp\n    headers:\n      Authorization: Bearer ${MCP_EXECUTOR_API_KEY}\n    enabled: true\n"},
		{"null servers", "mcp_servers:\nx: 1\n", "mcp_servers:\n  executor:\n    url: http://127.0.0.1:4788/mcp\n    headers:\n      Authorization: Bearer ${MCP_EXECUTOR_API_KEY}\n    enabled: true\nx: 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if tt.in != "" {
				if err := os.WriteFile(path, []byte(tt.in), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := SetMCPServer(path, "executor", ExecutorServer()); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestSetMCPServerRefusesBadShapes(t *testing.T) {
	for _, in := range []string{"- a\n- b\n", "mcp_servers: [1]\n", "a: [\n"} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
			t.Fatal(err)
		}
		err := SetMCPServer(path, "executor", ExecutorServer())
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: got %v, want an error naming the file", in, err)
		}
		if got, _ := os.ReadFile(path); string(got) != in {
			t.Errorf("%q: file changed to %q", in, got)
		}
	}
}

func TestSetEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(path, []byte("# keys\nOPENAI_API_KEY=abc\nMCP_EXECUTOR_API_KEY=old\nexport MCP_EXECUTOR_API_KEY=older\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetEnv(path, ExecutorKeyVar, "exk_new-123"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "# keys\nOPENAI_API_KEY=abc\nMCP_EXECUTOR_API_KEY=exk_new-123\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode())
	}
	for _, bad := range []string{"", "a b", "a\nB=c", "x$y", `q"`} {
		err := SetEnv(path, ExecutorKeyVar, bad)
		if err == nil || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: got %v, want a refusal that does not quote the value", bad, err)
		}
	}
}
