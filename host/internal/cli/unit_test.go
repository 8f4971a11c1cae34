package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestHostPlatform(t *testing.T) {
	noKVM := func() error { return errors.New("permission denied") }
	kvm := func() error { return nil }
	tests := []struct {
		goos, arch string
		open       func() error
		ok         bool
	}{
		{"darwin", "arm64", noKVM, true},
		{"darwin", "amd64", kvm, false},
		{"linux", "amd64", kvm, true},
		{"linux", "arm64", kvm, true},
		{"linux", "amd64", noKVM, false},
		{"windows", "amd64", kvm, false},
	}
	for _, tt := range tests {
		if err := hostPlatform(tt.goos, tt.arch, tt.open); (err == nil) != tt.ok {
			t.Errorf("%s/%s: %v", tt.goos, tt.arch, err)
		}
	}
}

func TestCheckNetworkMode(t *testing.T) {
	if err := checkNetworkMode(config.NetworkFull); err != nil {
		t.Error(err)
	}
	for _, m := range []config.NetworkMode{config.NetworkNone, config.NetworkStrict} {
		err := checkNetworkMode(m)
		if err == nil || !strings.Contains(err.Error(), "smolvm 1.0.4") || !strings.Contains(err.Error(), "=full") {
			t.Errorf("%s: %v", m, err)
		}
	}
}

func TestDeepCheck(t *testing.T) {
	report := func(status health.Status, services ...health.Service) *health.Report {
		return &health.Report{Status: status, Checks: map[health.Code]health.Check{
			health.CheckWorkspaceDisk: {Status: status, Severity: health.SeverityWarning, Message: "disk"}}, Services: services}
	}
	tests := []struct {
		name string
		r    *health.Report
		ok   bool
	}{
		{"healthy", report(health.StatusHealthy, health.Service{Name: "sshd", State: health.ServiceRunning}), true},
		{"degraded is a warning only", report(health.StatusDegraded), true},
		{"unhealthy", report(health.StatusUnhealthy), false},
		{"service down", report(health.StatusHealthy, health.Service{Name: "hermes", State: health.ServiceFatal}), false},
	}
	for _, tt := range tests {
		if err := deepCheck(tt.r); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestProgressModes(t *testing.T) {
	events := []protocol.Event{
		{Type: protocol.EventStep, Step: "hermes", State: protocol.StepStarted},
		{Type: protocol.EventProgress, Step: "hermes", Progress: &protocol.Progress{Current: 1, Total: 4}},
		{Type: protocol.EventProgress, Step: "hermes", Progress: &protocol.Progress{Current: 1, Total: 4}},
		{Type: protocol.EventWarning, Level: protocol.LevelWarn, Message: "slow mirror"},
		{Type: protocol.EventStep, Step: "hermes", State: protocol.StepFailed, Message: "boom"},
	}
	var plain, js bytes.Buffer
	p, j := newProgress(&plain, "text"), newProgress(&js, "json")
	for _, ev := range events {
		p.Event(ev)
		j.Event(ev)
	}
	want := "[hermes] started\n[hermes] 25%\nwarning: slow mirror\n[hermes] failed: boom\n"
	if plain.String() != want {
		t.Errorf("plain:\n%s\nwant:\n%s", plain.String(), want)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != len(events) {
		t.Fatalf("json: %d lines for %d events", len(lines), len(events))
	}
	for _, l := range lines {
		if _, err := protocol.DecodeEvent([]byte(l)); err != nil {
			t.Errorf("json line %q: %v", l, err)
		}
	}
	tty := &progress{w: &bytes.Buffer{}, mode: renderTTY, lastPct: map[string]int{}}
	for _, ev := range events {
		tty.Event(ev)
	}
	if out := tty.w.(*bytes.Buffer).String(); !strings.Contains(out, "✗ hermes: boom") || !strings.Contains(out, "[#####...............]  25%") {
		t.Errorf("tty:\n%q", out)
	}
}

func TestBoxStatusDecodes(t *testing.T) {
	st := boxStatus{Report: health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy,
		Checks: map[health.Code]health.Check{}}, Machine: json.RawMessage(`{"name":"b","state":"running"}`)}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := health.Decode(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), `"machine":{"name":"b","state":"running"}`) {
		t.Errorf("machine missing: %s", b)
	}
}
