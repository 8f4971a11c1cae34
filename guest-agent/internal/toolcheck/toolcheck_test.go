package toolcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

// TestRunToolChecks: the cheap half checks files only (a broken tool whose
// file exists passes), the deep half runs the commands and reports the
// first line of their output; a missing file fails both.
func TestRunToolChecks(t *testing.T) {
	root := t.TempDir()
	script := func(name, body string) {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("usr/local/bin/hermes", "echo 'Hermes Agent v0.16.0'")
	script("usr/local/bin/node", "echo broken >&2; exit 1")
	checks := []ToolCheck{
		{Code: health.CheckHermesVersion, Files: []string{"/usr/local/bin/hermes"}, Commands: [][]string{{"/usr/local/bin/hermes", "--version"}}},
		{Code: health.CheckNodeNPM, Files: []string{"/usr/local/bin/node"}, Commands: [][]string{{"/usr/local/bin/node", "--version"}}},
		{Code: health.CheckTmuxTerminfo, Severity: health.SeverityWarning, Files: []string{"/usr/bin/tmux", "/a|/usr/local/bin/hermes"}},
	}
	tests := []struct {
		deep bool
		want map[health.Code]string
	}{
		{false, map[health.Code]string{health.CheckHermesVersion: "healthy present: /usr/local/bin/hermes", health.CheckNodeNPM: "healthy present: /usr/local/bin/node",
			health.CheckTmuxTerminfo: "degraded /usr/bin/tmux is missing"}},
		{true, map[health.Code]string{health.CheckHermesVersion: "healthy /usr/local/bin/hermes --version: Hermes Agent v0.16.0",
			health.CheckNodeNPM: "unhealthy /usr/local/bin/node --version: exit status 1: broken", health.CheckTmuxTerminfo: "degraded /usr/bin/tmux is missing"}},
	}
	for _, tt := range tests {
		got := RunToolChecks(t.Context(), checks, ToolOptions{Root: root, Deep: tt.deep, Now: time.Unix(0, 0)})
		for code, want := range tt.want {
			c := got[code]
			if line := string(c.Status) + " " + c.Message; !strings.HasPrefix(line, want) {
				t.Errorf("deep=%v %s: %q, want %q", tt.deep, code, line, want)
			}
		}
	}
}
