package box

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// verbTransport answers agent verbs from a table (argv joined by spaces →
// stdout, exit status) and records the order they were asked in.
type verbTransport struct {
	answers map[string]string
	codes   map[string]int
	asked   []string
}

func (v *verbTransport) Run(_ context.Context, req protocol.Request, _ io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	verb := strings.Join(req.Argv, " ")
	v.asked = append(v.asked, verb)
	if _, err := io.WriteString(stdout, v.answers[verb]); err != nil {
		return 0, err
	}
	return v.codes[verb], nil
}

func TestRefreshDiscovery(t *testing.T) {
	healthy, err := json.Marshal(health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy, Checks: map[health.Code]health.Check{health.CheckGate: gateActive},
		Services: []health.Service{{Name: "hermes", State: health.ServiceRunning}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		answer string
		code   int
		asked  []string
		err    string
	}{
		{"restarted, then waited for", `{"restarted":true,"bootId":"b-1"}`, 0, []string{"executor refresh-discovery", "health --json"}, ""},
		{"already restarted in this boot", `{"restarted":false,"bootId":"b-1"}`, 0, []string{"executor refresh-discovery"}, ""},
		{"the agent refuses", "", 1, []string{"executor refresh-discovery"}, "exited with status 1"},
		{"an endless answer", strings.Repeat("x", 5<<10), 0, []string{"executor refresh-discovery"}, "exceeds the limit of 4 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &verbTransport{answers: map[string]string{"executor refresh-discovery": tt.answer, "health --json": string(healthy)},
				codes: map[string]int{"executor refresh-discovery": tt.code}}
			b := &Box{timing: fastTimings(), ui: nopUI{}}
			err := refreshDiscovery(t.Context(), b, "box", tr)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("got %v, want %q", err, tt.err)
			}
			if strings.Join(tr.asked, "|") != strings.Join(tt.asked, "|") {
				t.Fatalf("asked %q, want %q", tr.asked, tt.asked)
			}
		})
	}
}
