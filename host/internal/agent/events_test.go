package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// TestEventBudget: a box inventing step names or repeating messages gets
// its first events through, one warning, and nothing more.
func TestEventBudget(t *testing.T) {
	var got []protocol.Event
	b := &eventBudget{emit: func(ev protocol.Event) { got = append(got, ev) }, steps: map[string]bool{}}
	for i := range 10 * maxEventSteps {
		b.event(protocol.Event{Type: protocol.EventProgress, Step: fmt.Sprintf("s%d", i)})
		b.event(protocol.Event{Type: protocol.EventProgress, Step: "s0"}) // a known step always passes
	}
	for range 10 * maxLogEvents {
		b.event(protocol.Event{Type: protocol.EventLog, Message: "m"})
	}
	if want := maxEventSteps + 10*maxEventSteps + maxLogEvents + 1; len(got) != want {
		t.Fatalf("%d events passed, want %d", len(got), want)
	}
	big := &eventBudget{emit: func(ev protocol.Event) { got = append(got, ev) }, steps: map[string]bool{}}
	got = nil
	for range 1000 {
		big.event(protocol.Event{Type: protocol.EventLog, Message: strings.Repeat("M", 1<<20)})
	}
	if len(got) != maxEventText/termsafe.MaxLine+1 {
		t.Fatalf("%d events of 1 MiB passed", len(got))
	}
	warnings := 0
	for _, ev := range got {
		if ev.Type == protocol.EventWarning {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("%d warnings", warnings)
	}
}

// eventTransport sends its events, then exits with code.
type eventTransport struct {
	events []protocol.Event
	code   int
}

func (e eventTransport) Run(_ context.Context, _ protocol.Request, _ io.Reader, _ io.Writer, onEvent func(protocol.Event)) (int, error) {
	for _, ev := range e.events {
		onEvent(ev)
	}
	return e.code, nil
}

// TestCallReportsTheAgentsErrorOnce: a failing verb's error event becomes
// its exit error instead of a relayed line; an earlier error, or the error
// of a verb that succeeds, is passed on; a failed step's reason moves to
// its fields and is the cause when there is no error event.
func TestCallReportsTheAgentsErrorOnce(t *testing.T) {
	errEv := func(m string) protocol.Event {
		return protocol.Event{Type: protocol.EventLog, Level: protocol.LevelError, Message: m}
	}
	failed := protocol.Event{Type: protocol.EventStep, Step: "hermes", State: protocol.StepFailed, Message: "installer failed"}
	tests := []struct {
		name    string
		tr      eventTransport
		err     string   // "" for success
		relayed []string // the messages passed on
	}{
		{"error event", eventTransport{[]protocol.Event{errEv("logs hermes: no such file")}, 1},
			"logs hermes: no such file (agent logs exited with status 1)", nil},
		{"two errors", eventTransport{[]protocol.Event{errEv("first"), errEv("last")}, 2},
			"last (agent logs exited with status 2)", []string{"first"}},
		{"success keeps the error", eventTransport{[]protocol.Event{errEv("odd")}, 0}, "", []string{"odd"}},
		{"failed step", eventTransport{[]protocol.Event{failed}, 3}, "hermes: installer failed (agent logs exited with status 3)", []string{""}},
		{"failed step and error", eventTransport{[]protocol.Event{failed, errEv("provision step \"hermes\" failed")}, 3},
			"provision step \"hermes\" failed (agent logs exited with status 3)", []string{""}},
		{"silent", eventTransport{nil, 4}, "agent logs exited with status 4", nil},
		{"escapes", eventTransport{[]protocol.Event{errEv("bad \x1b]0;title\x07")}, 1}, `bad \x1b]0;title\x07 (agent logs exited with status 1)`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var relayed []string
			var fields []map[string]string
			err := New(tt.tr, func(ev protocol.Event) {
				relayed = append(relayed, ev.Message)
				fields = append(fields, ev.Fields)
			}).Call(context.Background(), Logs, []string{"hermes"}, nil, nil)
			if (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
			var ee *ExitError
			if tt.err != "" && (!errors.As(err, &ee) || ee.ExitCode() != tt.tr.code) {
				t.Errorf("exit status of %v, want %d", err, tt.tr.code)
			}
			if !slices.Equal(relayed, tt.relayed) {
				t.Errorf("relayed %q, want %q", relayed, tt.relayed)
			}
			if len(tt.relayed) > 0 && tt.relayed[0] == "" && fields[0]["error"] != "installer failed" {
				t.Errorf("the failed step's fields %v lack its reason", fields[0])
			}
		})
	}
}
