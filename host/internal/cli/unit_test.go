package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

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
