package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestParseEgressDenial: the lines smolvm's own parser accepts and
// ignores (src/agent/manager.rs, its tests).
func TestParseEgressDenial(t *testing.T) {
	tests := []struct {
		line string
		want egressDenial
		ok   bool
	}{
		{"[2026-08-13T02:31:05Z]: egress policy denied connect to 93.184.215.14:443", egressDenial{"2026-08-13T02:31:05Z", "connect", "93.184.215.14:443"}, true},
		{"[2026-08-13T02:31:06Z]: egress policy denied sendto 8.8.8.8:53", egressDenial{"2026-08-13T02:31:06Z", "sendto", "8.8.8.8:53"}, true},
		{"[2026-08-13T02:31:07Z]: egress policy denied resolve evil.example.com", egressDenial{"2026-08-13T02:31:07Z", "resolve", "evil.example.com"}, true},
		{"[2026-08-13T02:31:05.123456Z WARN  libkrun] egress policy denied connect to 93.184.215.14:443", egressDenial{"2026-08-13T02:31:05.123456Z", "connect", "93.184.215.14:443"}, true},
		{"[2026-08-14T03:13:08Z]: virtio-net: guest TCP SYN source=x destination=y", egressDenial{}, false},
		{"[2026-08-13T02:31:07Z INFO  libkrun] egress policy configured with 2 CIDR rule(s)", egressDenial{}, false},
		{"plain unrelated stderr line", egressDenial{}, false},
		{"[ts WARN x] egress policy denied", egressDenial{}, false},
	}
	for _, tt := range tests {
		got, ok := parseEgressDenial(tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%q: %+v %v, want %+v %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestReadEgressDenialsKeepsTheNewest: the limit keeps the newest events,
// oldest first; no log is no events.
func TestReadEgressDenialsKeepsTheNewest(t *testing.T) {
	path := filepath.Join(t.TempDir(), egressDenialsLog)
	if got := readEgressDenials(path, 3); got == nil || len(got) != 0 {
		t.Fatalf("no log: %v", got)
	}
	var log string
	for i := range 10 {
		log += fmt.Sprintf("[2026-08-13T02:31:%02dZ]: egress policy denied connect to 10.0.0.%d:443\n", i, i)
	}
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := readEgressDenials(path, 3)
	if len(got) != 3 || got[0].Dest != "10.0.0.7:443" || got[2].Dest != "10.0.0.9:443" {
		t.Fatalf("%+v", got)
	}
}
