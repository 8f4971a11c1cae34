package relay

import (
	"slices"
	"strings"
	"testing"
	"time"

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
			readEvents(strings.NewReader(tt.stderr), func(ev protocol.Event) { got = append(got, summary(ev)) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("events = %.200q, want %.200q", got, tt.want)
			}
		})
	}
}

func TestReadEventsKeepsFields(t *testing.T) {
	line := `{"time":"2026-11-22T10:00:00Z","type":"progress","level":"debug","message":"m","progress":{"current":5,"total":10,"unit":"B"},"fields":{"k":"v"},"future":1}`
	var got []protocol.Event
	readEvents(strings.NewReader(line+"\n"), func(ev protocol.Event) { got = append(got, ev) })
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	ev := got[0]
	want := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if !ev.Time.Equal(want) || ev.Progress == nil || ev.Progress.Current != 5 || ev.Progress.Total != 10 || ev.Fields["k"] != "v" {
		t.Errorf("decoded %+v", ev)
	}
}
