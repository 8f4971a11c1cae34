package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

func fakeProc(t *testing.T, uptime, load string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"uptime": uptime, "loadavg": load} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCollect(t *testing.T) {
	now := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	ws := t.TempDir()
	r := Collect(Options{
		ProcDir:   fakeProc(t, "1234.56 99.0\n", "0.50 0.25 0.10 1/123 4567\n"),
		Workspace: ws,
		Version:   "v9",
		Started:   now.Add(-90 * time.Second),
		Now:       func() time.Time { return now },
	})
	if r.SchemaVersion != health.SchemaVersion || r.Agent.Version != "v9" || r.Agent.UptimeSeconds != 90 {
		t.Fatalf("header: %+v", r)
	}
	if r.System.UptimeSeconds != 1234 || r.System.Load != [3]float64{0.5, 0.25, 0.1} {
		t.Fatalf("system: %+v", r.System)
	}
	if r.System.Workspace.Path != ws || r.System.Workspace.TotalBytes == 0 {
		t.Fatalf("workspace: %+v", r.System.Workspace)
	}
	if c := r.Checks[health.CheckWorkspaceDisk]; c.Since != now {
		t.Fatalf("check since %v", c.Since)
	}
	if r.Services == nil {
		t.Fatal("services must encode as [] not null")
	}
}

func TestCollectMissingWorkspaceIsUnhealthy(t *testing.T) {
	r := Collect(Options{ProcDir: fakeProc(t, "1 1", "0 0 0"), Workspace: filepath.Join(t.TempDir(), "none")})
	c := r.Checks[health.CheckWorkspaceDisk]
	if r.Status != health.StatusUnhealthy || c.Status != health.StatusUnhealthy || !strings.Contains(c.Message, "none") {
		t.Fatalf("got %s / %+v", r.Status, c)
	}
}

func TestDiskCheck(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		free uint64
		want health.Status
	}{
		{"plenty", 10 << 30, health.StatusHealthy},
		{"low", 512 << 20, health.StatusDegraded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := diskCheck(health.Disk{Path: "/w", TotalBytes: 20 << 30, FreeBytes: tt.free}, nil, now)
			if c.Status != tt.want {
				t.Fatalf("got %s, want %s (%s)", c.Status, tt.want, c.Message)
			}
		})
	}
}

func TestBadProcFilesDoNotBreakReport(t *testing.T) {
	r := Collect(Options{ProcDir: fakeProc(t, "garbage", "1"), Workspace: t.TempDir()})
	if r.System.UptimeSeconds != 0 || r.Status != health.StatusHealthy && r.Status != health.StatusDegraded {
		t.Fatalf("got %+v", r)
	}
}
