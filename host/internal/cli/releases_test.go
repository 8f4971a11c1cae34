package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// wantEnv is the SMOLVM_* environment hermes-box gives a smolvm call on a
// release: on the calls that can boot a machine (start, pack create) the
// VMM's seccomp and Landlock confinement (the tests run on Linux) and the
// strict egress floor where the release has the variable; the raised
// extraction cap on create --from; nothing else.
func wantEnv(release, line string) map[string]string {
	env := map[string]string{}
	booting := strings.HasPrefix(line, "machine start ") || strings.HasPrefix(line, "pack create ")
	if booting && !strings.HasSuffix(line, " --help") {
		env["SMOLVM_SECCOMP"], env["SMOLVM_LANDLOCK"] = "enforce", "enforce"
		if release != "1.0.4" {
			env["SMOLVM_EGRESS_FLOOR"] = "strict"
		}
	}
	// From 1.16.2 the export's helper VM is sized (pins.ExportHelperMemoryMiB).
	if strings.HasPrefix(line, "pack create ") && !strings.HasSuffix(line, " --help") && release == "1.25.4" {
		env[smolvm.ExportHelperMemoryEnv] = strconv.Itoa(pins.ExportHelperMemoryMiB)
	}
	if strings.HasPrefix(line, "machine create ") && strings.Contains(line, " --from ") {
		env["SMOLVM_PACK_CACHE_MAX_BYTES"] = "17179869184"
	}
	return env
}

func expectEnv(t *testing.T, release string, calls []boxtest.Call) {
	t.Helper()
	for _, c := range calls {
		if want := wantEnv(release, c.Line); !maps.Equal(c.Env, want) && !(len(c.Env) == 0 && len(want) == 0) {
			t.Errorf("smolvm %s: %q ran with %v, want %v", release, c.Line, c.Env, want)
		}
	}
}

// initQualified qualifies the fake's release with hermes-box doctor, then
// runs init, which accepts the binary with a notice naming the run and
// reads no help text again.
func initQualified(t *testing.T, h *harness) result {
	t.Helper()
	doc := mustRun(t, h, "doctor", "--json")
	var rep struct{ Run, Smolvm string }
	boxtest.Must(t, json.Unmarshal([]byte(doc.stdout), &rep))
	r := initBox(t, h)
	want := "smolvm " + rep.Smolvm + " is outside the table of supported releases (" + pins.SmolvmTableVersions() + "); accepted for "
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "(run "+rep.Run+")") {
		t.Errorf("init on the qualified %s does not say so (%q, run %s):\n%s", rep.Smolvm, want, rep.Run, r.stderr)
	}
	return r
}

// bigFile is a file written into the box's workspace.
type bigFile struct {
	path string
	data []byte
}

// bigWorkspaceFile writes 6 MiB of incompressible bytes into the box's
// workspace: the restore streams them through `machine exec -i`, well past
// the ~270 KiB at which 1.0.4's exec -i stalled (smolvm #926).
func bigWorkspaceFile(t *testing.T, h *harness) bigFile {
	t.Helper()
	f := bigFile{path: filepath.Join(h.State, "machines", boxtest.Machine, "root", "workspace", "work", "big.bin"), data: make([]byte, 6<<20)}
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(f.data)
	boxtest.Must(t, os.MkdirAll(filepath.Dir(f.path), 0o755))
	boxtest.Must(t, os.WriteFile(f.path, f.data, 0o644))
	return f
}

// expectApplyExec checks the restore's `snapshot apply` call: through
// `agent relay --hold-output` where the release's `exec -i` is not safe
// with large input (1.0.4), through `agent relay` elsewhere.
func expectApplyExec(t *testing.T, release string, calls []boxtest.Call) {
	t.Helper()
	want := map[string]string{"1.0.4": "relay --hold-output", "1.9.3": "relay", "1.25.4": "relay"}[release]
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c.Line, "machine exec ") && strings.Contains(c.Line, " -i ") {
			n++
			if _, args, _ := strings.Cut(c.Line, "/hermes-box-agent "); args != want {
				t.Errorf("smolvm %s: the restore ran %q, want the agent's %q", release, c.Line, want)
			}
		}
	}
	if n == 0 {
		t.Errorf("smolvm %s: the restore made no `machine exec -i` into the candidate: %v", release, boxtest.Lines(calls))
	}
}

// snapshotCalls is the exact smolvm argv of `snapshot` on a running box
// (the stream itself goes through the SSH relay).
var snapshotCalls = []string{
	"machine status --name hermes-box --json", "machine ls --json", "machine status --name hermes-box --json",
	"--version", "machine ls --json", "machine status --name hermes-box --json",
}

// restoreCalls is the exact smolvm argv of a restore on release, as
// patterns: the candidate's name and its SSH port vary; the box's port is
// sshPort. The candidate is created, booted in restore mode, given the
// backup, restarted, checked and deleted; then the box is replaced the
// same way.
func restoreCalls(release string, sshPort int) []string {
	relay := map[string]string{"1.0.4": "relay --hold-output", "1.9.3": "relay", "1.25.4": "relay"}[release]
	agent := regexp.QuoteMeta("-- /usr/local/sbin/hermes-box-agent ")
	create := func(name, port string) string {
		return "machine create --name " + name + regexp.QuoteMeta(" --from $ROOT/images/hermes-base.smolmachine --cpus 4 --mem 8192 --storage 15 --overlay 6 -p ") +
			port + regexp.QuoteMeta(":22 -e HERMES_BOX_EXECUTOR_ENABLED=false -e HERMES_BOX_EXECUTOR_IMAGE="+pins.DefaultExecutorImage+
			" -e HERMES_BOX_EXECUTOR_HOST_PORT=4788 -e HERMES_BOX_RESTORE_MODE=true --net")
	}
	boot := func(name string) []string {
		return []string{"machine data-dir --name " + name, "machine update --name " + name + " --net", "machine start --name " + name, "machine status --name " + name + " --json",
			"machine exec --stream --name " + name + " " + agent + "version",
			"machine exec --stream -i --name " + name + " " + agent + regexp.QuoteMeta(relay),
			"machine status --name " + name + " --json", "machine stop --name " + name, "machine start --name " + name, "machine status --name " + name + " --json",
			"machine exec --stream --name " + name + " " + agent + "hostkeys", "machine status --name " + name + " --json"}
	}
	candidate := `hermes-box-restore-\d+-\d+`
	// Preflight (the release, the machines, the box's state); the safety
	// snapshot goes through the relay; then the box is stopped.
	calls := []string{"machine ls --json", "--version", "machine ls --json", "machine ls --json",
		"machine status --name hermes-box --json", "--version", "machine ls --json",
		"machine status --name hermes-box --json", "machine status --name hermes-box --json", "machine stop --name hermes-box",
		create(candidate, `\d+`)}
	calls = append(calls, boot(candidate)...)
	calls = append(calls, "machine stop --name "+candidate, "machine delete --name "+candidate+" --force",
		"machine delete --name hermes-box --force", create("hermes-box", strconv.Itoa(sshPort)))
	return append(calls, boot("hermes-box")...)
}

// expectCallsLike compares the argv sequence with patterns, each matching
// one whole line.
func expectCallsLike(t testing.TB, got []boxtest.Call, want []string) {
	t.Helper()
	g := boxtest.Lines(got)
	for i := range max(len(g), len(want)) {
		if i >= len(g) || i >= len(want) || !regexp.MustCompile("^"+want[i]+"$").MatchString(g[i]) {
			t.Fatalf("smolvm call %d differs\n got:\n  %s\nwant (patterns):\n  %s", i+1, strings.Join(g, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// TestLifecycleAcrossReleases runs init, stop, start, restart, snapshot and
// restore against the fake at each release the tests know (1.0.4 and 1.9.3
// of the table, and the 1.25 profile, outside it, after hermes-box doctor
// qualified the binary), checking the exact argv and SMOLVM_* environment
// of every smolvm call; the argv of a whole run is the same on every
// release but for the restore's `relay --hold-output` on 1.0.4. The
// restore carries 6 MiB of workspace.
func TestLifecycleAcrossReleases(t *testing.T) {
	buildBinaries(t) // skips under -short before the subtests, which compare their runs
	t.Parallel()
	runs := map[string][]string{}
	for _, release := range []string{"1.0.4", "1.9.3", "1.25.4"} {
		t.Run(release, func(t *testing.T) {
			h := newHarness(t)
			h.Env = append(h.Env, "FAKESMOLVM_VERSION="+release)
			var r result
			if release == "1.25.4" {
				r = initQualified(t, h)
			} else {
				r = initBox(t, h)
			}
			all := slices.Clone(r.calls)
			expectEnv(t, release, r.calls)
			data := filepath.Join(h.State, "machines", boxtest.Machine, "data")
			_, pointer := os.Stat(filepath.Join(data, ".pack-shared"))
			if shared := release != "1.0.4" && runtime.GOOS == "linux"; shared != (pointer == nil) {
				t.Errorf("shared-store pointer present %v, want %v", pointer == nil, shared)
			}
			if release != "1.0.4" {
				if entries, _ := os.ReadDir(filepath.Join(data, "pack")); len(entries) != 0 {
					t.Errorf("1.9.x left the private pack populated: %v", entries)
				}
			}
			status := []string{"machine status --name hermes-box --json"}
			r = mustRun(t, h, "stop")
			boxtest.ExpectCalls(t, r.calls, append(slices.Clone(status), "machine stop --name hermes-box"))
			all = append(all, r.calls...)
			r = mustRun(t, h, "start")
			boxtest.ExpectCalls(t, r.calls, slices.Concat(status, []string{"--version"}, boxtest.Started(boxtest.Machine)))
			expectEnv(t, release, r.calls)
			all = append(all, r.calls...)
			r = mustRun(t, h, "restart")
			boxtest.ExpectCalls(t, r.calls, slices.Concat(status, []string{"--version", "machine stop --name hermes-box", status[0]}, boxtest.Started(boxtest.Machine)))
			expectEnv(t, release, r.calls)
			all = append(all, r.calls...)
			big := bigWorkspaceFile(t, h)
			r = mustRun(t, h, "snapshot", "matrix")
			boxtest.ExpectCalls(t, r.calls, snapshotCalls)
			expectEnv(t, release, r.calls)
			all = append(all, r.calls...)
			boxtest.Must(t, os.Remove(big.path))
			r = mustRun(t, h, "restore", strings.TrimSpace(r.stdout))
			expectEnv(t, release, r.calls)
			expectApplyExec(t, release, r.calls)
			expectCallsLike(t, r.calls, restoreCalls(release, h.Port))
			if got := boxtest.ReadFile(t, big.path); !bytes.Equal(got, big.data) {
				t.Errorf("the restore brought back %d bytes of %s, want the %d backed up", len(got), big.path, len(big.data))
			}
			all = append(all, r.calls...)
			if !slices.ContainsFunc(r.calls, func(c boxtest.Call) bool { return strings.HasPrefix(c.Line, "machine start --name hermes-box") }) {
				t.Errorf("the restore did not start the box: %v", boxtest.Lines(r.calls))
			}
			expectHealthy(t, h, "after the restore on "+release)
			var rec struct {
				EgressFloor string `json:"egress_floor"`
			}
			boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "machine.json")), &rec))
			if want := map[string]string{"1.0.4": "", "1.9.3": "strict", "1.25.4": "strict"}[release]; rec.EgressFloor != want {
				t.Errorf("the box last started with SMOLVM_EGRESS_FLOOR=%q, want %q", rec.EgressFloor, want)
			}
			for _, c := range all {
				line := c.Line
				if strings.HasSuffix(line, " --help") {
					continue // only the first drive of a binary reads its help
				}
				if strings.Contains(line, "-restore-") || strings.Contains(line, "backups") {
					line = "(candidate or backup path)" // names with times and random ports
				}
				line = strings.TrimSuffix(line, " --hold-output") // expectApplyExec checks it
				runs[release] = append(runs[release], strings.ReplaceAll(line, fmt.Sprintf("-p %d:22", h.Port), "-p SSH:22"))
			}
		})
	}
	for _, other := range []string{"1.9.3", "1.25.4"} {
		if a, b := runs["1.0.4"], runs[other]; len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("the argv of a run differs between releases:\n1.0.4:\n  %s\n%s:\n  %s", strings.Join(a, "\n  "), other, strings.Join(b, "\n  "))
		}
	}
}

// TestNetworkModesProven: on 1.9.3 strict and none are offered, created
// with smolvm's own flags and proven by the agent's probes at every start
// (against loopback targets here); status shows the last proof. A probe
// that gets through stops the box and names the probe.
func TestNetworkModesProven(t *testing.T) {
	t.Parallel()
	open := closingListener(t)
	closed, openAddr := "127.0.0.1:1", open.Addr().String()
	plan := func(directIP string) string { return probePlan(t, open, directIP) }
	for _, mode := range []string{"strict", "none"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, "HERMES_BOX_NETWORK_MODE="+mode)
			h.Write("network-hosts.txt", "allowed.example.com\n")
			h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.9.3", "HBX_TEST_NETPROBE_PLAN="+plan(closed))
			r := h.run("init")
			if r.code != 0 {
				t.Fatalf("init: %d %s", r.code, r.stderr)
			}
			create := map[string]string{"strict": " --net --allow-host allowed.example.com", "none": " --net --outbound-localhost-only"}[mode]
			if i := boxtest.Index(r.calls, `^machine create --name hermes-box --from .*`+create+`$`); i < 0 {
				t.Errorf("no create with %q:\n  %s", create, strings.Join(boxtest.Lines(r.calls), "\n  "))
			}
			r = mustRun(t, h, "status")
			// No VMM recorded a denial here: the proof is the box's word.
			if !regexp.MustCompile(`(?m)^  network +` + mode + ` +` + mode + `, last proof \S+ reported by the box: \d+ probes held, not confirmed from outside it \(smolvm recorded no egress denial for `).MatchString(r.stdout) {
				t.Errorf("status does not show the proof:\n%s", r.stdout)
			}
			mustRun(t, h, "stop")
			h.Extra = []string{"HBX_TEST_NETPROBE_PLAN=" + plan(openAddr)}
			r = h.run("start")
			want := fmt.Sprintf("network mode %s is not in force: direct-ip probe %s was reachable", mode, openAddr)
			if r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "the machine was stopped") {
				t.Fatalf("start with a leaking direct IP: %d\n%s", r.code, r.stderr)
			}
			if got := h.Machines()[boxtest.Machine]; got != "stopped" {
				t.Errorf("the box is %s after a failed proof", got)
			}
			// The box is stopped: status exits 3.
			if r = h.run("status"); r.code != 3 || !strings.Contains(r.stdout, "FAILED: network mode "+mode+" is not in force: direct-ip probe") {
				t.Errorf("status does not show the failed proof:\n%s", r.stdout)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	_, err := fmt.Sscan(s, &n)
	boxtest.Must(t, err)
	return n
}

// TestUnlistedSmolvm: a release outside the table is refused plainly, with
// the supported releases, the install command and the doctor (not the
// capability table); the setting that used to admit it blind is refused,
// naming what replaced it.
func TestUnlistedSmolvm(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.16.2")
	r := h.run("init")
	for _, want := range []string{"smolvm 1.16.2 is not a release hermes-box supports (it supports 1.0.4, 1.9.0, 1.9.1, 1.9.2, 1.9.3)",
		"next: install smolvm 1.9.3: " + pins.SmolvmInstallCommand("1.9.3"), "qualify it on this host with hermes-box doctor"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "shared-on-linux") {
			t.Fatalf("init on 1.16.2: exit %d, want %q in\n%s", r.code, want, r.stderr)
		}
	}
	if i := boxtest.Index(r.calls, `^machine create --name`); i >= 0 {
		t.Errorf("a machine was created: %s", r.calls[i].Line)
	}
	h.Extra = []string{"HERMES_BOX_SMOLVM_ALLOW_NEWER=true"}
	r = h.run("status")
	if r.code == 0 || !strings.Contains(r.stderr, "HERMES_BOX_SMOLVM_ALLOW_NEWER was replaced by `hermes-box doctor`") || len(r.calls) != 0 {
		t.Errorf("the replaced setting: exit %d, %d smolvm calls\n%s", r.code, len(r.calls), r.stderr)
	}
}

// TestPausedBox: on the 1.25 profile a paused box shows as paused, and
// start changes nothing and says how to resume it.
func TestPausedBox(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.25.4")
	initQualified(t, h)
	pause := exec.Command(bins.Smolvm, "machine", "pause", "--name", boxtest.Machine)
	pause.Env = h.Env
	if out, err := pause.CombinedOutput(); err != nil {
		t.Fatalf("smolvm machine pause: %v %s", err, out)
	}
	r := h.run("status")
	if r.code == 0 || !regexp.MustCompile(`(?m)^hermes-box +paused `).MatchString(r.stdout) {
		t.Errorf("status of a paused box: exit %d\n%s", r.code, r.stdout)
	}
	r = h.run("start")
	if r.code == 0 || !strings.Contains(r.stderr, "the box hermes-box is paused") || !strings.Contains(r.stderr, "smolvm machine resume --name hermes-box") {
		t.Errorf("start of a paused box: exit %d\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(r.calls, `^machine (start|stop) `); i >= 0 {
		t.Errorf("start changed the paused box: %s", r.calls[i].Line)
	}
}

// TestSmolvmHelpLacksFlag: a smolvm binary whose own `--help` does not
// list a flag hermes-box passes (the broken profile's `machine create`
// lacks --net-backend) is refused by init naming the flag, the subcommand
// and the release, before any machine exists; nothing is remembered, so
// the next run checks again.
func TestSmolvmHelpLacksFlag(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Extra = []string{"FAKESMOLVM_BROKEN=help-lacks-flag"}
	want := "smolvm 1.0.4 does not list --net-backend in `smolvm machine create --help`, and hermes-box passes --net-backend to machine create"
	for range 2 {
		r := h.run("init")
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("init: exit %d, want %q:\n%s", r.code, want, r.stderr)
		}
		boxtest.ExpectCalls(t, r.calls, append([]string{"--version"}, h.HelpCalls()...))
	}
	if len(h.Machines()) != 0 {
		t.Errorf("machines exist: %v", h.Machines())
	}
}

// TestNetworkProofEvidence: strict mode on 1.9.3, where smolvm records its
// egress denials on the host. A box that forges its proof (every probe
// "held", no socket opened) still starts, but status shows the proof as
// the box's word, not confirmed; probes that smolvm's VMM saw denied (the
// test agent plays the VMM) are confirmed.
func TestNetworkProofEvidence(t *testing.T) {
	t.Parallel()
	open := closingListener(t)
	h := newHarness(t, "HERMES_BOX_NETWORK_MODE=strict")
	h.Write("network-hosts.txt", "allowed.example.com\n")
	h.Env = append(h.Env, "FAKESMOLVM_VERSION=1.9.3", "HBX_TEST_NETPROBE_PLAN="+probePlan(t, open, "127.0.0.1:1"))
	h.Hostile("netprobe", "forge")
	r := mustRun(t, h, "init")
	if boxtest.Index(r.calls, `^machine egress-events --name hermes-box --limit \d+ --json$`) < 0 {
		t.Errorf("the proof was not checked against smolvm's egress events:\n  %s", strings.Join(boxtest.Lines(r.calls), "\n  "))
	}
	r = mustRun(t, h, "status", "--json")
	var st struct {
		Network struct {
			Summary   string
			LastProof struct {
				Confirmed bool
				Evidence  string
			}
		}
	}
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &st))
	if st.Network.LastProof.Confirmed || !strings.Contains(st.Network.Summary, "reported by the box") ||
		!strings.Contains(st.Network.Summary, "smolvm recorded no egress denial for 127.0.0.1:1, unlisted.test:1, [::1]:1") {
		t.Errorf("a forged proof is shown as %+v", st.Network)
	}
	if r = mustRun(t, h, "status"); strings.Contains(r.stdout, "confirmed by smolvm") {
		t.Errorf("status shows a forged proof as confirmed:\n%s", r.stdout)
	}

	mustRun(t, h, "stop")
	h.Hostile("netprobe", "vmm-denies")
	mustRun(t, h, "start")
	r = mustRun(t, h, "status")
	if !regexp.MustCompile(`(?m)^  network +strict +strict, last proof \S+: \d+ probes held, confirmed by smolvm \(smolvm's own egress denials show each of the 3 outside targets blocked\)$`).MatchString(r.stdout) {
		t.Errorf("status does not show the confirmed proof:\n%s", r.stdout)
	}
	mustRun(t, h, "stop")
}
