package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/executor"
)

func TestExecutorStatusWithoutReleases(t *testing.T) {
	code, out, errs := run(t, "", "--root", t.TempDir(), "executor", "status", "--sizes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res executor.StatusResult
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
		{[]string{"executor", "connect-hermes", "--mcp-url", "http://192.168.1.5:4788/mcp"}, "not http://127.0.0.1:PORT/mcp"},
		{[]string{"executor", "connect-hermes", "--mcp-url", "https://127.0.0.1:4788/mcp"}, "not http://127.0.0.1:PORT/mcp"},
		{[]string{"executor", "connect-hermes", "--mcp-url", "http://127.0.0.1:4788/other"}, "not http://127.0.0.1:PORT/mcp"},
	}
	for _, tt := range tests {
		code, _, errs := run(t, "", append([]string{"--root", t.TempDir()}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d: %s", tt.args, code, errs)
		}
	}
}
