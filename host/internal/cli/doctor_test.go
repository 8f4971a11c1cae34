package cli_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/doctor"
)

// doctorRows are the rows of every doctor run, in order.
var doctorRows = []string{"flags", "boot", "vmm-confined", "loopback-ports", "egress-floor-strict", "exec-exit-status",
	"exec-timeout", "exec-stdin-8mib", "pack-layout", "secrets-dropped", "xattrs-pack"}

// TestDoctorAcrossProfiles runs `hermes-box doctor --json` on each profile
// of the fake: 1.0.4, 1.9.3 and 1.25.4 pass every row and leave no machine
// behind; each broken profile fails with its row named (the rows after a
// failing flags or vmm-confined row do not run; the others do, and pass),
// and init then refuses the binary naming that row before any machine
// exists.
func TestDoctorAcrossProfiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, version, broken string
		failRow, detail       string
		detailToo             []string
		blocks                bool // the rows after the failing one do not run
		initSays              string
	}{
		{name: "1.0.4", version: "1.0.4"},
		{name: "1.9.3", version: "1.9.3"},
		{name: "1.25.4", version: "1.25.4"},
		{name: "vmm-unconfined", version: "1.25.4", broken: "vmm-unconfined", failRow: "vmm-confined", blocks: true,
			detail:   "the VMM ran without a seccomp filter and was stopped: smolvm ignored SMOLVM_SECCOMP=enforce",
			initSays: "found smolvm 1.25.4 at "},
		{name: "help-lacks-flag", version: "1.9.3", broken: "help-lacks-flag", failRow: "flags", blocks: true,
			detail:   "smolvm 1.9.3 does not list --net-backend in `smolvm machine create --help`",
			initSays: "smolvm 1.9.3 does not list --net-backend in `smolvm machine create --help`"},
		{name: "floor-leaks", version: "1.25.4", broken: "floor-leaks", failRow: "egress-floor-strict",
			detail:    "under SMOLVM_EGRESS_FLOOR=strict the guest reached host loopback through the host alias 100.96.0.1:",
			detailToo: []string{"LAN gateway 192.0.2.1:80 (refused: it answered)", "cloud metadata 169.254.169.254:80 (refused: it answered)"},
			initSays:  "found smolvm 1.25.4 at "},
		{name: "pack-drops-xattrs", version: "1.25.4", broken: "pack-drops-xattrs", failRow: "xattrs-pack",
			detail:   "pack create --from-vm dropped user.hbx-doctor: /hbx-doctor-xattr in the machine created from the pack has no such attribute",
			initSays: "found smolvm 1.25.4 at "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.Env = append(h.Env, "FAKESMOLVM_VERSION="+tt.version, "FAKESMOLVM_BROKEN="+tt.broken)
			r := h.run("doctor", "--json")
			var rep doctor.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("doctor --json: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
			}
			var names []string
			for _, row := range rep.Rows {
				names = append(names, row.Name)
				t.Logf("%-20s %-7s %5.2fs %s", row.Name, row.Verdict, row.Seconds, row.Detail)
				want := "pass"
				switch i := slices.Index(doctorRows, row.Name); {
				case row.Name == tt.failRow:
					want = "fail"
				case tt.blocks && i > slices.Index(doctorRows, tt.failRow):
					want = "not-run"
				}
				if row.Verdict != want || row.Seconds < 0 {
					t.Errorf("row %s: %s (%s), want %s", row.Name, row.Verdict, row.Detail, want)
				}
				for _, d := range append([]string{tt.detail}, tt.detailToo...) {
					if row.Name == tt.failRow && !strings.Contains(row.Detail, d) {
						t.Errorf("row %s: %q, want %q", row.Name, row.Detail, d)
					}
				}
			}
			if !slices.Equal(names, doctorRows) {
				t.Errorf("rows %v, want %v", names, doctorRows)
			}
			if rep.Passed != (tt.failRow == "") || (r.code == 0) != rep.Passed {
				t.Errorf("passed %v, exit %d", rep.Passed, r.code)
			}
			if len(h.Machines()) != 0 {
				t.Errorf("doctor left machines: %v", h.Machines())
			}
			if tt.failRow == "" {
				return
			}
			r = h.run("init")
			if r.code == 0 || !strings.Contains(r.stderr, tt.initSays) || !strings.Contains(r.stderr, tt.failRow) && tt.failRow != "flags" {
				t.Errorf("init after a failed doctor: exit %d, want %q and the row %s:\n%s", r.code, tt.initSays, tt.failRow, r.stderr)
			}
			if i := boxtest.Index(r.calls, `^(machine (create|start) --name|pack create --from-vm)`); i >= 0 {
				t.Errorf("init drove smolvm after the refusal: %s", r.calls[i].Line)
			}
		})
	}
}

// TestDoctorTable is the human table: one line per row with its verdict
// and time, and the verdict on the binary.
func TestDoctorTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.25.4")
	r := mustRun(t, h, "doctor")
	for _, want := range []string{"smolvm 1.25.4, doctor run ", "ROW                  VERDICT  TIME", "exec-stdin-8mib      pass     ",
		"egress-floor-strict  pass     ", "xattrs-pack          pass     ",
		"smolvm 1.25.4 is outside the supported table and passed: hermes-box accepts this binary"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor's table lacks %q:\n%s", want, r.stdout)
		}
	}
}
