package relay

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestReadEvents(t *testing.T) {
	event := `{"time":"2026-11-22T10:00:00Z","type":"step","level":"info","message":"pulling","step":"pull","state":"started"}`
	long := strings.Repeat("x", maxEventLine+10)
	tests := []struct {
		name   string
		stderr string
		want   []string
	}{
		{name: "empty", stderr: "", want: nil},
		{name: "one event", stderr: event + "\n", want: []string{"step:info:pulling"}},
		{name: "no final newline", stderr: event, want: []string{"step:info:pulling"}},
		{name: "crlf and blank lines", stderr: "\n" + event + "\r\n  \n", want: []string{"step:info:pulling"}},
		{name: "text line", stderr: "sudo: a password is required\n", want: []string{"raw:sudo: a password is required"}},
		{name: "json without type", stderr: `{"message":"x"}` + "\n", want: []string{`raw:{"message":"x"}`}},
		{name: "invalid utf-8", stderr: "bad \xff byte\n", want: []string{"raw:bad \uFFFD byte"}},
		{
			name:   "over-long line is cut and reading goes on",
			stderr: long + "\n" + event + "\n",
			want:   []string{"raw:" + long[:maxEventLine], "step:info:pulling"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			readEvents(strings.NewReader(tt.stderr), func(ev protocol.Event) { got = append(got, summary(ev)) }, stderrCap{})
			if !slices.Equal(got, tt.want) {
				t.Errorf("events = %.200q, want %.200q", got, tt.want)
			}
		})
	}
}

func TestReadEventsKeepsFields(t *testing.T) {
	line := `{"time":"2026-11-22T10:00:00Z","type":"progress","level":"debug","message":"m","progress":{"current":5,"total":10,"unit":"B"},"fields":{"k":"v"},"future":1}`
	var got []protocol.Event
	readEvents(strings.NewReader(line+"\n"), func(ev protocol.Event) { got = append(got, ev) }, stderrCap{})
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	ev := got[0]
	want := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if !ev.Time.Equal(want) || ev.Progress == nil || ev.Progress.Current != 5 || ev.Progress.Total != 10 || ev.Fields["k"] != "v" {
		t.Errorf("decoded %+v", ev)
	}
}

// TestReadEventsCapsRawBytes: the cap counts stderr's raw bytes, so blank
// lines, a line past maxEventLine and a field nobody reads end the call
// as soon as they pass it, though they decode to few events or none.
func TestReadEventsCapsRawBytes(t *testing.T) {
	const max = 1 << 20
	limit := stderrCap{what: "the stderr of agent x", max: max}
	for name, stderr := range map[string]string{
		"blank lines":   strings.Repeat("\n", max+1),
		"one long line": strings.Repeat("x", 3*max),
		"unread field":  `{"time":"2026-11-22T10:00:00Z","type":"log","level":"info","message":"","future":"` + strings.Repeat("f", max) + `"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			events := 0
			err := readEvents(strings.NewReader(stderr), func(protocol.Event) { events++ }, limit)
			var le *bounded.LimitError
			if !errors.As(err, &le) || le.What != limit.what || le.Limit != max {
				t.Errorf("err %v after %d events, want the cap of %d bytes", err, events, max)
			}
			if err := readEvents(strings.NewReader(stderr), nil, stderrCap{}); err != nil {
				t.Errorf("without a cap: %v", err)
			}
		})
	}
	if err := readEvents(strings.NewReader(strings.Repeat("\n", max)), nil, limit); err != nil {
		t.Errorf("exactly the cap: %v", err)
	}
}
