package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/relay"
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

func TestDeepCheck(t *testing.T) {
	report := func(status health.Status, services ...health.Service) *health.Report {
		return &health.Report{Status: status, Checks: map[health.Code]health.Check{
			health.CheckWorkspaceDisk: {Status: status, Severity: health.SeverityWarning, Message: "disk"},
			health.CheckGate:          gateActive}, Services: services}
	}
	noGate := report(health.StatusHealthy)
	delete(noGate.Checks, health.CheckGate)
	gateOff := report(health.StatusHealthy)
	gateOff.Checks[health.CheckGate] = health.Check{Status: health.StatusUnhealthy, Severity: health.SeverityInfo, Message: "mode manual"}
	tests := []struct {
		name string
		r    *health.Report
		ok   bool
	}{
		{"healthy", report(health.StatusHealthy, health.Service{Name: "sshd", State: health.ServiceRunning}), true},
		{"degraded is a warning only", report(health.StatusDegraded), true},
		{"unhealthy", report(health.StatusUnhealthy), false},
		{"service down", report(health.StatusHealthy, health.Service{Name: "hermes", State: health.ServiceFatal}), false},
		{"no gate check", noGate, false},
		{"gate not active, whatever its severity", gateOff, false},
	}
	for _, tt := range tests {
		if err := deepCheck(tt.r); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// refusingTransport fails every call as sshd refusing the key does.
type refusingTransport struct{ calls int }

func (r *refusingTransport) Run(context.Context, protocol.Request, io.Reader, io.Writer, func(protocol.Event)) (int, error) {
	r.calls++
	return 0, fmt.Errorf("dialing 127.0.0.1:2222: %w: ssh: unable to authenticate", relay.ErrAuthRefused)
}

// TestWaitHealthyStopsWhenTheKeyIsRefused: sshd refusing the project key
// (a box whose authorized_keys sshd will not read) fails at once.
func TestWaitHealthyStopsWhenTheKeyIsRefused(t *testing.T) {
	a := &Box{timing: fastTimings(), ui: nopUI{}}
	tr := &refusingTransport{}
	if err := waitHealthy(t.Context(), a, nil, tr); !errors.Is(err, relay.ErrAuthRefused) || tr.calls != 1 {
		t.Fatalf("got %v after %d calls; want ErrAuthRefused after 1", err, tr.calls)
	}
}

// gateActive is the gate check of a box whose approval gate is in place.
var gateActive = health.Check{Status: health.StatusHealthy, Severity: health.SeverityCritical, Message: "smart-plugin: mode smart, as provisioned"}

// halfProvisioned is a deep report of a box whose Hermes does not run.
var halfProvisioned = &health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusUnhealthy,
	Checks: map[health.Code]health.Check{health.CheckGate: gateActive, health.CheckHermesVersion: {Status: health.StatusUnhealthy,
		Severity: health.SeverityCritical, Message: "/usr/local/bin/hermes --version: exit status 1"}},
	Services: []health.Service{{Name: "sshd", State: health.ServiceRunning}, {Name: "hermes", State: health.ServiceRunning}}}

// reportsTransport answers each health request with the next report.
type reportsTransport struct {
	reports []*health.Report
	calls   int
	// deep answers a deep request (health --deep), when set.
	deep *health.Report
	argv [][]string
}

func (r *reportsTransport) Run(_ context.Context, req protocol.Request, _ io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	r.argv = append(r.argv, req.Argv)
	rep := r.reports[min(r.calls, len(r.reports)-1)]
	if r.deep != nil && slices.Contains(req.Argv, "--deep") {
		rep = r.deep
	}
	r.calls++
	return 0, json.NewEncoder(stdout).Encode(rep)
}

// TestWaitHealthyWaitsForStartingServices: a service still STARTING when the
// agent first answers is waited for; a FATAL one fails at once; a report
// that never passes fails at the deadline. Once the cheap report passes,
// one deep report (the installed tools run) must pass too: a
// half-provisioned box (hermes --version fails) is never ready.
func TestWaitHealthyWaitsForStartingServices(t *testing.T) {
	report := func(status health.Status, hermes health.ServiceState) *health.Report {
		return &health.Report{SchemaVersion: health.SchemaVersion, Status: status, Checks: map[health.Code]health.Check{health.CheckGate: gateActive},
			Services: []health.Service{{Name: "sshd", State: health.ServiceRunning}, {Name: "hermes", State: hermes}}}
	}
	starting := report(health.StatusDegraded, health.ServiceStarting)
	running := report(health.StatusHealthy, health.ServiceRunning)
	fatal := report(health.StatusUnhealthy, health.ServiceFatal)
	tests := []struct {
		name      string
		reports   []*health.Report
		deep      *health.Report
		ok        bool
		wantCalls int
	}{
		{"starting, then running", []*health.Report{starting, starting, running}, nil, true, 4},
		{"backoff, then running", []*health.Report{report(health.StatusDegraded, health.ServiceBackoff), running}, nil, true, 3},
		{"fatal fails at once", []*health.Report{starting, fatal, running}, nil, false, 2},
		{"never running", []*health.Report{starting}, nil, false, -1},
		{"half-provisioned", []*health.Report{running}, halfProvisioned, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Box{timing: fastTimings(), ui: nopUI{}}
			a.timing.startupDeadline = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), a.timing.startupDeadline)
			defer cancel()
			tr := &reportsTransport{reports: tt.reports, deep: tt.deep}
			err := waitHealthy(ctx, a, nil, tr)
			if (err == nil) != tt.ok || (tt.wantCalls > 0 && tr.calls != tt.wantCalls) {
				t.Fatalf("err %v after %d reports; want ok=%v after %d", err, tr.calls, tt.ok, tt.wantCalls)
			}
			if tt.ok && !slices.Contains(tr.argv[len(tr.argv)-1], "--deep") {
				t.Errorf("ready after %v; the last report was not deep", tr.argv)
			}
			want := "hermes is"
			if tt.deep != nil {
				want = "hermes-version unhealthy"
			}
			if !tt.ok && !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not name %q: %v", want, err)
			}
		})
	}
}

func TestBoxStatusDecodes(t *testing.T) {
	st := Status{Report: health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy,
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

// nopUI renders nothing.
type nopUI struct{}

func (nopUI) Event(protocol.Event)            {}
func (nopUI) Step(string, string) func(error) { return func(error) {} }
func (nopUI) Info(string, ...any)             {}
func (nopUI) Warn(string, ...any)             {}

// TestStartSecretsOnlyForTheBox: the box resolves its mapped secrets (a
// missing host variable refuses, naming it); any other machine, such as a
// restore's candidate, gets none.
func TestStartSecretsOnlyForTheBox(t *testing.T) {
	t.Setenv("HBX_UNIT_SECRET", "sk-unit")
	b := &Box{cfg: &config.Config{MachineName: "hermes-box",
		Secrets: []config.SecretMapping{{Guest: "OPENAI_API_KEY", Host: "HBX_UNIT_SECRET", Line: 1}}}}
	s, ok, err := startSecrets(b, "hermes-box")
	if err != nil || !ok || s.Env["OPENAI_API_KEY"] != "sk-unit" {
		t.Fatalf("box: %v %v %v", s.Names(), ok, err)
	}
	if s, ok, err := startSecrets(b, "hermes-box-restore-1a2b"); err != nil || ok || len(s.Env) != 0 {
		t.Fatalf("candidate: %v %v %v", s.Names(), ok, err)
	}
	t.Setenv("HBX_UNIT_SECRET", "")
	if _, _, err := startSecrets(b, "hermes-box"); err == nil || !strings.Contains(err.Error(), `"HBX_UNIT_SECRET"`) {
		t.Fatalf("missing host variable: %v", err)
	}
}

// TestStateExitCode holds status's exit statuses to README's table.
func TestStateExitCode(t *testing.T) {
	for state, want := range map[string]int{StateHealthy: 0, StateDegraded: 1, StateUnhealthy: 1, StateStopped: 3, StateMissing: 4} {
		if got := StateExitCode(state); got != want {
			t.Errorf("%s exits %d, want %d", state, got, want)
		}
	}
}

// TestNeedsRecovery: an interrupted cut-over and an unsettled snapshot
// leave work for the next command; other errors do not.
func TestNeedsRecovery(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("restore: %w", backup.ErrInterrupted): true,
		fmt.Errorf("snapshot: %w", backup.ErrNotSettled): true,
		errors.New("restore failed"):                     false,
	} {
		if NeedsRecovery(err) != want {
			t.Errorf("NeedsRecovery(%v) = %v", err, !want)
		}
	}
}
