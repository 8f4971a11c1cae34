package agent

import (
	"strings"
	"testing"
	"unicode"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// escape is a payload a hostile box puts in every field: OSC 52 (writes
// the clipboard), a window title, a clear screen, a forged host line, a
// bidi override, a CR and a C1 CSI.
const escape = "\x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x07\x1b[2J\n[1/3] ✓ host step\t\u202e\r\u009b31m"

// hasControl reports a byte or rune a terminal may obey.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}

func TestLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hermes", "hermes"},
		{"a\nb\tc\r\x1b[2Jd", "abc[2Jd"},
		{"\u202eevil\u009b", "evil"},
		{"\xff", "\uFFFD"},
		{strings.Repeat("é", 40), strings.Repeat("é", 30) + "…"},
	}
	for _, tt := range tests {
		if got := Line(tt.in, MaxStepName); got != tt.want || len(got) > MaxStepName {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	got := Text("first\n[1/3] ✓ forged\x1b]0;t\x07\n")
	if want := "first\n" + Continuation + `[1/3] ✓ forged\x1b]0;t\x07`; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

// TestSanitise: an event of the box keeps only known types, states,
// levels and fields, each made safe; its time and elapsed are dropped and
// it is marked as the box's.
// TestSanitiseKeepsTheAgentsFields: the events the agent sends, in the
// shapes guest-agent/internal/provision and oci write them, keep every
// field (make e2e reads provision's "changed" to tell a step that found
// its work done).
func TestSanitiseKeepsTheAgentsFields(t *testing.T) {
	for _, ev := range []protocol.Event{
		{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: "apt-index", State: protocol.StepDone, Message: "already done",
			Fields: map[string]string{"changed": "false"}},
		{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: "node", State: protocol.StepDone, Message: "done",
			Fields: map[string]string{"changed": "true", "changes": "3"}},
		{Type: protocol.EventLog, Level: protocol.LevelInfo, Step: "node", Message: "artifact",
			Fields: map[string]string{"sha256": "ab", "status": "fetched", "url": "https://example.invalid/n"}},
		{Type: protocol.EventWarning, Level: protocol.LevelWarn, Step: "apt-index", Message: "slow", Fields: map[string]string{"timeout": "5m0s"}},
		{Type: protocol.EventProgress, Step: "pull", Progress: &protocol.Progress{Current: 1, Total: 2, Unit: "bytes"},
			Fields: map[string]string{"blob": "sha256:ab"}},
	} {
		out, ok := sanitise(ev)
		if !ok {
			t.Fatalf("dropped %+v", ev)
		}
		for k, v := range ev.Fields {
			if out.Fields[k] != v {
				t.Errorf("%s event of %s: field %s = %q, want %q", ev.Type, ev.Step, k, out.Fields[k], v)
			}
		}
	}
}

func TestSanitise(t *testing.T) {
	hostile := protocol.Event{Type: protocol.EventStep, Level: protocol.Level(escape), Step: escape, State: protocol.StepDone,
		Message: escape, Fields: map[string]string{"elapsed": escape, "url": escape, "x" + escape: "y", "error": escape},
		Progress: &protocol.Progress{Current: 1, Total: 2, Unit: escape}}
	out, ok := sanitise(hostile)
	if !ok {
		t.Fatal("a known step event was dropped")
	}
	if hasControl(out.Step) || hasControl(string(out.Level)) || out.Level != protocol.LevelInfo || out.Progress != nil {
		t.Errorf("step %q level %q progress %v", out.Step, out.Level, out.Progress)
	}
	if strings.Count(out.Message, "\n") != 1 || !strings.Contains(out.Message, "\n"+Continuation) || strings.ContainsAny(out.Message, "\x1b\x07\r\u009b\u202e") {
		t.Errorf("message %q", out.Message)
	}
	if _, set := out.Fields["elapsed"]; set || out.Fields[OriginField] != OriginBox || len(out.Fields) != 3 {
		t.Errorf("fields %q", out.Fields)
	}
	for k, v := range out.Fields {
		if hasControl(k) || hasControl(v) {
			t.Errorf("field %q=%q", k, v)
		}
	}
	for _, bad := range []protocol.Event{
		{Type: protocol.EventType(escape), Message: "m"},
		{Type: protocol.EventStep, State: protocol.StepState(escape), Step: "s"},
		{Type: protocol.EventStep, Step: "s"},
	} {
		if _, ok := sanitise(bad); ok {
			t.Errorf("kept %+v", bad)
		}
	}
	p, _ := sanitise(protocol.Event{Type: protocol.EventProgress, Step: "pull", Progress: &protocol.Progress{Current: 5, Total: 10, Unit: "by\ntes"}})
	if p.Progress == nil || *p.Progress != (protocol.Progress{Current: 5, Total: 10, Unit: "bytes"}) {
		t.Errorf("progress %+v", p.Progress)
	}
}
