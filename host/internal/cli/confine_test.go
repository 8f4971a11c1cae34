package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestVMMConfinement: the box's VMM (the fake's VMM process, which installs
// a real seccomp filter under SMOLVM_SECCOMP=enforce) is read from /proc
// and shown by status; a VMM that ignores the variable (the broken
// profile) is stopped and refused, naming what /proc said; with
// HERMES_BOX_VMM_CONFINEMENT=off nothing is asked, the broken VMM runs,
// and every command warns.
func TestVMMConfinement(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	r := mustRun(t, h, "status")
	if !regexp.MustCompile(`(?m)^  vmm +confined +VMM pid \d+ runs under a seccomp filter \(Seccomp: 2\)$`).MatchString(r.stdout) {
		t.Errorf("status does not show the confinement:\n%s", r.stdout)
	}
	if mode := vmmSeccomp(t, h); mode != "2" {
		t.Errorf("the fake's VMM runs with Seccomp: %s, want 2 (a real filter)", mode)
	}
	mustRun(t, h, "stop")
	h.Extra = []string{"FAKESMOLVM_BROKEN=vmm-unconfined"}
	r = h.run("start")
	want := "runs without a seccomp filter (Seccomp: 0 in /proc/"
	if r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "the machine was stopped") {
		t.Fatalf("start with an unconfined VMM: exit %d, want %q:\n%s", r.code, want, r.stderr)
	}
	if got := h.Machines()[boxtest.Machine]; got != "stopped" {
		t.Errorf("the unconfined box is %s", got)
	}
	h.Extra = append(h.Extra, "HERMES_BOX_VMM_CONFINEMENT=off")
	warning := "HERMES_BOX_VMM_CONFINEMENT=off: smolvm's VMM runs without its seccomp and Landlock confinement"
	r = mustRun(t, h, "start")
	for _, c := range r.calls {
		if c.Env["SMOLVM_SECCOMP"] != "" || c.Env["SMOLVM_LANDLOCK"] != "" {
			t.Errorf("confinement asked for while off: %q %v", c.Line, c.Env)
		}
	}
	for _, args := range [][]string{{"status"}, {"stop"}} {
		r = h.run(args...)
		if !strings.Contains(r.stderr, warning) {
			t.Errorf("%v does not warn:\n%s", args, r.stderr)
		}
		if args[0] == "status" && !regexp.MustCompile(`(?m)^  vmm +off +HERMES_BOX_VMM_CONFINEMENT=off`).MatchString(r.stdout) {
			t.Errorf("status does not show the confinement off:\n%s", r.stdout)
		}
	}
}

// vmmSeccomp reads the Seccomp field of the box's VMM process as the
// kernel reports it.
func vmmSeccomp(t *testing.T, h *harness) string {
	t.Helper()
	var rec struct {
		PID int `json:"pid"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "machine.json")), &rec))
	for _, line := range strings.Split(string(boxtest.ReadFile(t, fmt.Sprintf("/proc/%d/status", rec.PID))), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Seccomp field for pid %d", rec.PID)
	return ""
}
