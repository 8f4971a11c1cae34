package health

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestGoldenReport(t *testing.T) {
	golden, err := os.ReadFile("testdata/report-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(golden)
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	checks := []struct {
		name      string
		got, want any
	}{
		{"status", r.Status, StatusDegraded},
		{"agent version", r.Agent.Version, "v0.1.0"},
		{"load", r.System.Load, [3]float64{0.5, 0.25, 0.1}},
		{"free", r.System.Workspace.FreeBytes, uint64(805306368)},
		{"disk severity", r.Checks[CheckWorkspaceDisk].Severity, SeverityWarning},
		{"gateway since", r.Checks[CheckHermesGateway].Since, time.Date(2026, 11, 22, 1, 40, 0, 0, time.UTC)},
		{"services", len(r.Services), 2},
		{"sshd", r.Services[0], Service{Name: "sshd", State: ServiceRunning, PID: 42, UptimeSeconds: 3590}},
		{"hermes last exit", *r.Services[1].LastExit, one},
		{"hermes state", r.Services[1].State, ServiceBackoff},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(out, '\n'), golden) {
		t.Errorf("re-encoded report differs from golden:\n%s", out)
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"other schema", `{"schemaVersion":2,"status":"healthy"}`, "schema version 2"},
		{"unknown status", `{"schemaVersion":1,"status":"fine"}`, `unknown status "fine"`},
		{"unknown check status", `{"schemaVersion":1,"status":"healthy","checks":{"x":{"status":"meh"}}}`, `check "x"`},
		{"not json", `status: healthy`, "decoding health report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode([]byte(tt.doc)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ok := Check{Status: StatusHealthy, Severity: SeverityCritical}
	warn := Check{Status: StatusDegraded, Severity: SeverityWarning}
	crit := Check{Status: StatusUnhealthy, Severity: SeverityCritical}
	info := Check{Status: StatusUnhealthy, Severity: SeverityInfo}
	tests := []struct {
		name   string
		checks map[Code]Check
		want   Status
	}{
		{"no checks", nil, StatusHealthy},
		{"all ok", map[Code]Check{"a": ok}, StatusHealthy},
		{"info failure ignored", map[Code]Check{"a": ok, "b": info}, StatusHealthy},
		{"warning", map[Code]Check{"a": ok, "b": warn}, StatusDegraded},
		{"critical beats warning", map[Code]Check{"a": warn, "b": crit}, StatusUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Report{Checks: tt.checks}
			r.Summarize()
			if r.Status != tt.want {
				t.Fatalf("got %s, want %s", r.Status, tt.want)
			}
		})
	}
}

// TestGoldenGateReport pins the additive "gate" check and object: a report
// that carries them round-trips byte for byte, and a report without them
// (the first golden) still encodes without a "gate" key.
func TestGoldenGateReport(t *testing.T) {
	golden, err := os.ReadFile("testdata/report-v1-gate.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(golden)
	if err != nil {
		t.Fatal(err)
	}
	if r.Gate == nil {
		t.Fatal("gate object not decoded")
	}
	if got := r.Checks[CheckGate]; got.Status != StatusUnhealthy || got.Severity != SeverityCritical {
		t.Errorf("gate check = %+v, want unhealthy critical", got)
	}
	if r.Gate.Mechanism != "smart-plugin" || r.Gate.EffectiveMode != "manual" || r.Gate.IntendedMode != "smart" || len(r.Gate.Problems) != 1 {
		t.Errorf("gate = %+v", *r.Gate)
	}
	saved := r.Status
	r.Summarize()
	if r.Status != saved || saved != StatusUnhealthy {
		t.Errorf("a failed critical gate check summarises to %s, golden says %s", r.Status, saved)
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(out, '\n'), golden) {
		t.Errorf("re-encoded report differs from golden:\n%s", out)
	}
	r.Gate = nil
	plain, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(plain, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["gate"]; ok {
		t.Error("a report without gate details must not carry a gate object")
	}
}
