package agent

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// What the box says reaches a person only as one of two kinds of text.
// A one-line field (a name, a state, a time, a version, a path) loses
// every control character, newline and tab included, and is bounded; a
// multi-line text keeps its lines but indents every continuation with
// Continuation, so no line of it can pass for one of the host's.
const (
	// MaxStepName bounds a step name the box gives, in bytes.
	MaxStepName = 64
	// maxText bounds a multi-line text of the box (an event's message),
	// in bytes before it is made safe.
	maxText = 64 << 10
	// maxFieldValue bounds any other one-line field of an event.
	maxFieldValue = 512
	// Continuation starts every line of a box's text after its first.
	Continuation = "    | "
	// OriginField is set to OriginBox on every event that came from the
	// box, so that --log-format json tells them from the host's.
	OriginField = "origin"
	OriginBox   = "box"
)

// eventFields are the fields an event of the box may carry: the shared
// list the agent's emitters draw their names from (protocol.EventFields).
// A box-supplied "elapsed" is not one: the host times steps.
var eventFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range protocol.EventFields {
		m[f] = true
	}
	return m
}()

// Line is s from the box as one line of at most max bytes: every control
// character (newline and tab too), DEL, C1 control and bidirectional
// control is dropped, bytes that are not UTF-8 become U+FFFD, and a longer
// line is cut with "…".
func Line(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || isFormat(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// isFormat reports the bidirectional controls and other invisible format
// characters, which reorder or hide what a reader sees.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// Text is s from the box as text of several lines: each line made safe as
// termsafe does (escapes shown, not obeyed) and every line after the first
// indented with Continuation.
func Text(s string) string {
	if len(s) > maxText {
		cut := maxText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	s = termsafe.Text(strings.TrimRight(s, "\n"))
	return strings.ReplaceAll(s, "\n", "\n"+Continuation)
}

// sanitise is the event ev of the box as the host passes it on: only known
// types, states, levels and fields, each field made safe as one line, the
// message as text, the box's time and elapsed dropped (the host stamps and
// times its events), and marked as the box's. ok is false for an event of
// an unknown type or state, which is dropped.
func sanitise(ev protocol.Event) (out protocol.Event, ok bool) {
	if !ev.Type.Known() || (ev.Type == protocol.EventStep && !ev.State.Known()) {
		return out, false
	}
	out = protocol.Event{Type: ev.Type, Level: ev.Level, Step: Line(ev.Step, MaxStepName), Message: Text(ev.Message)}
	if ev.Type == protocol.EventStep {
		out.State = ev.State
	}
	if !out.Level.Known() {
		out.Level = protocol.LevelInfo
	}
	if p := ev.Progress; p != nil && ev.Type == protocol.EventProgress {
		out.Progress = &protocol.Progress{Current: p.Current, Total: p.Total, Unit: Line(p.Unit, 16)}
	}
	out.Fields = map[string]string{OriginField: OriginBox}
	for k, v := range ev.Fields {
		if eventFields[k] {
			out.Fields[k] = Line(v, maxFieldValue)
		}
	}
	return out, true
}
