package agent

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// answerTransport answers every verb with the same stdout and exit code.
type answerTransport struct {
	out  string
	code int
}

func (a answerTransport) Run(_ context.Context, _ protocol.Request, stdin io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	if stdin != nil {
		_, _ = io.Copy(io.Discard, stdin)
	}
	_, err := io.WriteString(stdout, a.out)
	return a.code, err
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTypedAnswersAreOneLine: the names, states and times the box answers
// (a service's name, a proof's time) come out of the client as one line,
// so they cannot forge the host's lines in status.
func TestTypedAnswersAreOneLine(t *testing.T) {
	forged := "gateway\nhermes-box: box healthy\x1b]0;t\x07"
	svc := []health.Service{{Name: forged, State: health.ServiceState("RUNNING\n  forged")}}
	report := health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy, Checks: map[health.Code]health.Check{}, Services: svc}
	r, err := New(answerTransport{out: mustJSON(t, report)}, nil).Health(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(answerTransport{out: mustJSON(t, protocol.ServicesStatus{Services: []protocol.ServiceStatus{{Service: svc[0], Description: forged}}})}, nil).ServicesStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	proof := netproof.Proof{Mode: "none", Time: "2026\n[ok] forged", Probes: []netproof.Probe{{Class: "gateway\n", Target: forged, Detail: forged}}}
	p, err := New(answerTransport{out: mustJSON(t, proof), code: 1}, nil).Netprobe(t.Context(), netproof.Plan{Mode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	hk, err := New(answerTransport{out: mustJSON(t, protocol.HostKeys{Keys: []protocol.HostKey{{Type: forged, Path: forged, Fingerprint: forged, PublicKey: forged}}})}, nil).HostKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	k := hk.Keys[0]
	for _, s := range []string{r.Services[0].Name, string(r.Services[0].State), st.Services[0].Name, p.Time, string(p.Probes[0].Class), p.Probes[0].Target, p.Probes[0].Detail,
		k.Type, k.Path, k.Fingerprint, k.PublicKey} {
		if hasControl(s) {
			t.Errorf("%q is not one line", s)
		}
	}
	many := netproof.Proof{Mode: "none", Probes: make([]netproof.Probe, maxProbes+1)}
	if _, err := New(answerTransport{out: mustJSON(t, many)}, nil).Netprobe(t.Context(), netproof.Plan{Mode: "none"}); err == nil || !strings.Contains(err.Error(), "probes") {
		t.Errorf("a proof of %d probes: %v", maxProbes+1, err)
	}
	keys := protocol.HostKeys{Keys: make([]protocol.HostKey, maxHostKeys+1)}
	if _, err := New(answerTransport{out: mustJSON(t, keys)}, nil).HostKeys(t.Context()); err == nil || !strings.Contains(err.Error(), "keys") {
		t.Errorf("%d host keys: %v", maxHostKeys+1, err)
	}
}

// argvTransport records the argv of the request it runs, and answers as
// a builder whose network is ready.
type argvTransport struct{ argv *[]string }

func (a argvTransport) Run(_ context.Context, req protocol.Request, _ io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	*a.argv = req.Argv
	_, err := io.WriteString(stdout, `{"ready":true,"route":{"ok":true},"dns":{"ok":true}}`)
	return 0, err
}

// TestNetcheckArgv: the builder's netcheck resolves its default host, or
// the one it is given.
func TestNetcheckArgv(t *testing.T) {
	tests := []struct {
		host string
		want []string
	}{
		{"", []string{"netcheck"}},
		{"archive.ubuntu.com", []string{"netcheck", "--host", "archive.ubuntu.com"}},
	}
	for _, tt := range tests {
		var got []string
		if err := New(argvTransport{&got}, nil).Netcheck(t.Context(), tt.host); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Netcheck(%q) ran %q (%v), want %q", tt.host, got, err, tt.want)
		}
	}
}
