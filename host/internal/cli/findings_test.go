package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// The tests of issue 27's findings, through the real binary, the fake
// smolvm and Debian's sshd.

// expectFailure checks a run's exit status, that its stderr holds every
// want, none of the refused texts, and that it ends with a next step.
func expectFailure(t *testing.T, what string, r result, code int, want []string, refused ...string) {
	t.Helper()
	ok := r.code == code && strings.Contains(r.stderr, "\nnext: ")
	for _, w := range want {
		ok = ok && strings.Contains(r.stderr, w)
	}
	for _, w := range refused {
		ok = ok && !strings.Contains(r.stderr, w)
	}
	if !ok {
		t.Errorf("%s: exit %d (want %d), stderr lacks one of %q or has one of %q:\n%s", what, r.code, code, want, refused, r.stderr)
	}
}

// TestErrorClassesBeforeInit is the audit of the errors a user meets, one
// per class (cli/explain.go): each has a plain cause and a next step, and
// no raw Go text (findings 4 and 10).
func TestErrorClassesBeforeInit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	other := filepath.Join(t.TempDir(), "nowhere.conf")
	tests := []struct {
		name    string
		extra   []string
		conf    string // replaces hermes-box.conf when set
		args    []string
		code    int
		want    []string
		refused []string
		noCalls bool
	}{
		{name: "flag value", args: []string{"logs", "-n", "abc"}, code: 2, noCalls: true,
			want:    []string{`invalid value "abc" for --lines: want a whole number`, "next: see hermes-box logs --help"},
			refused: []string{"strconv", "ParseInt"}},
		{name: "unknown flag", args: []string{"status", "--frobnicate"}, code: 2, noCalls: true,
			want: []string{"unknown flag: --frobnicate", "next: see hermes-box status --help"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, noCalls: true,
			want: []string{`unknown command "frobnicate"`, "next: see hermes-box --help"}},
		{name: "reserved label", args: []string{"snapshot", "list"}, code: 2, noCalls: true,
			want: []string{`"list" is a reserved word`, "next: see hermes-box snapshot --help"}},
		{name: "unsafe label", args: []string{"snapshot", "../../etc"}, code: 2, noCalls: true,
			want: []string{`the label "../../etc" has characters a backup's name cannot carry ('/'): a label is letters, digits`}},
		{name: "label too long", args: []string{"snapshot", strings.Repeat("x", 65)}, code: 2, noCalls: true,
			want: []string{"the label is 65 characters long; a label has at most 64"}},
		{name: "package of an empty backup name", args: []string{"package", "--snapshot", ""}, code: 2, noCalls: true,
			want: []string{"a backup is needed: a name `hermes-box backups` prints, or a path"}},
		{name: "no smolvm: status", extra: []string{"PATH=" + t.TempDir()}, args: []string{"status"}, code: 1,
			want: []string{"smolvm is not installed (or not on PATH)", "next: install it: " + pins.SmolvmInstallCommand(pins.SmolvmRecommended)}},
		{name: "unsupported smolvm", extra: []string{"FAKESMOLVM_VERSION=1.2.3"}, args: []string{"init"}, code: 1,
			want: []string{"smolvm 1.2.3 is not a release hermes-box supports (it supports " + strings.ReplaceAll(pins.SmolvmTableVersions(), ",", ", ") + ")",
				"next: install smolvm " + pins.SmolvmRecommended + ": " + pins.SmolvmInstallCommand(pins.SmolvmRecommended), "qualify it on this host with hermes-box doctor"},
			refused: []string{"LAN+host", "strict floor var"}},
		{name: "no /dev/kvm", extra: []string{"HBX_TEST_HOST=kvm-missing"}, args: []string{"init"}, code: 1,
			want:    []string{"this Linux host has no /dev/kvm, which smolvm needs", "next: load the KVM module", "nested virtualisation"},
			refused: []string{"--debug"}},
		{name: "/dev/kvm denied", extra: []string{"HBX_TEST_HOST=kvm-denied"}, args: []string{"init"}, code: 1,
			want: []string{"this user may not open /dev/kvm", "next: add yourself to the kvm group"}, refused: []string{"--debug"}},
		{name: "lower-case setting", conf: "hermes_box_ssh_port=2300\n", args: []string{"status"}, code: 1, noCalls: true,
			want: []string{`hermes-box.conf:1: "hermes_box_ssh_port" is not a setting: settings are upper-case (HERMES_BOX_SSH_PORT)`,
				"next: correct the setting named above"}},
		{name: "setting set twice", conf: "HERMES_BOX_CPUS=2\nHERMES_BOX_CPUS=3\n", args: []string{"status"}, code: 1, noCalls: true,
			want: []string{"hermes-box.conf:2: HERMES_BOX_CPUS is set twice (lines 1 and 2): keep one"}},
		{name: "missing HERMES_BOX_CONFIG", extra: []string{"HERMES_BOX_CONFIG=" + other}, args: []string{"status"}, code: 1, noCalls: true,
			want: []string{"HERMES_BOX_CONFIG names " + other + ", which does not exist"}},
		{name: "no box yet", args: []string{"logs"}, code: 4,
			want: []string{"next: run hermes-box init first"}},
		{name: "executor not enabled", args: []string{"executor", "open"}, code: 1, noCalls: true,
			want: []string{"the Executor is not enabled for this box", "next: the Executor is set when a box is created, so this box must be re-created",
				"hermes-box snapshot before-executor", "hermes-box destroy --force && hermes-box init"},
			refused: []string{"next: set HERMES_BOX_EXECUTOR_ENABLED=true"}},
	}
	conf := string(boxtest.ReadFile(t, filepath.Join(h.Root, "hermes-box.conf")))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.Extra = tt.extra
			if tt.conf != "" {
				h.Write("hermes-box.conf", tt.conf)
				defer h.Write("hermes-box.conf", conf)
			}
			r := h.run(tt.args...)
			expectFailure(t, strings.Join(tt.args, " "), r, tt.code, tt.want, tt.refused...)
			if tt.noCalls && len(r.calls) > 0 {
				t.Errorf("%v did work before refusing: %v", tt.args, boxtest.Lines(r.calls))
			}
		})
	}
}

// TestBuilderRefusesCPUs: a CPU count smolvm refuses names the setting, not
// a re-run that fails the same way (finding 4).
func TestBuilderRefusesCPUs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Extra = []string{"HERMES_BOX_CPUS=64", "FAKESMOLVM_FAIL=machine start@" + boxtest.Builder,
		"FAKESMOLVM_FAIL_MESSAGE=failed to start the VM: 64 vCPUs requested, the host has 2"}
	r := h.run("init")
	expectFailure(t, "init with 64 CPUs", r, 1,
		[]string{"64 vCPUs requested", "next: smolvm refused HERMES_BOX_CPUS=64 (this host has", "set a smaller HERMES_BOX_CPUS in " + filepath.Join(h.Root, "hermes-box.conf")},
		"re-run hermes-box init: it is safe")
}

// TestErrorClassesOfABox: a refused connection, the operation lock (which
// operation, which pid), a corrupt backup failing backups --verify, and
// status --json answering the help's own example for a stopped box
// (findings 4, 8, 9).
func TestErrorClassesOfABox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, v2Snapshots) // a v2 part's progress lines; a corrupt part
	initBox(t, h)

	// The published port stops answering while the machine runs.
	var rec struct{ PID int }
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "machine.json")), &rec))
	boxtest.Must(t, syscall.Kill(rec.PID, syscall.SIGKILL))
	waitGone(t, rec.PID)
	expectFailure(t, "logs with nothing on the port", h.run("logs"), 1,
		[]string{"nothing answers on the box's published port (connection refused)", "next: hermes-box status says whether the box runs"})
	mustRun(t, h, "restart")

	// A start hangs in smolvm while it holds the operation lock.
	mustRun(t, h, "stop")
	boxtest.Must(t, os.WriteFile(filepath.Join(h.State, "hang"), []byte("machine start\n"), 0o644))
	cmd := h.command(t.Context(), "start")
	boxtest.Must(t, cmd.Start())
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(h.State, "hang.reached")); err == nil {
			break
		}
		if i == 600 {
			t.Fatal("the start never reached smolvm")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := h.run("snapshot")
	expectFailure(t, "snapshot while a start holds the lock", r, 1,
		[]string{"another hermes-box operation is in progress: pid " + strconv.Itoa(cmd.Process.Pid) + ": ", " start (since ",
			"next: wait until it ends (or stop it with Ctrl-C in its terminal)"})
	boxtest.Must(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	boxtest.Must(t, os.Remove(filepath.Join(h.State, "hang")))

	// status --json, as the help's example reads it, for a stopped box.
	help := h.run("status", "--help").stdout
	m := regexp.MustCompile(`hermes-box status --json \| jq -r (\.\w+)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("status --help has no jq example:\n%s", help)
	}
	r = h.run("status", "--json")
	var st map[string]any
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &st))
	if got := st[strings.TrimPrefix(m[1], ".")]; r.code != 3 || got != "stopped" {
		t.Errorf("status --json | jq -r %s of a stopped box: %v (exit %d)", m[1], got, r.code)
	}

	// Off a terminal, a copy prints at most a line per part per ten
	// seconds, and never the previous backup's size as its own (finding 5).
	mustRun(t, h, "snapshot", "first")
	r = mustRun(t, h, "snapshot", "good")
	backup := strings.TrimSpace(r.stdout)
	for _, part := range []string{"snapshot rootfs", "snapshot workspace"} {
		if n := strings.Count(r.stderr, part+": "); n > 1+int(r.elapsed/(10*time.Second)) {
			t.Errorf("%d progress lines of %s in %v:\n%s", n, part, r.elapsed, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "~") || strings.Contains(r.stderr, "about ") || strings.Contains(r.stderr, "ETA") {
		t.Errorf("the second snapshot gives the first's size as its own:\n%s", r.stderr)
	}

	// A corrupt backup fails backups --verify.
	mustRun(t, h, "backups", "--verify")
	part := filepath.Join(backup, "workspace.tar.gz")
	b := boxtest.ReadFile(t, part)
	b[len(b)/2] ^= 0xff
	boxtest.Must(t, os.WriteFile(part, b, 0o644))
	r = h.run("backups", "--verify")
	expectFailure(t, "backups --verify with a corrupt backup", r, 1, []string{"1 of 2 backups are invalid: " + filepath.Base(backup)})
	if !strings.Contains(r.stdout, "invalid") {
		t.Errorf("the listing does not show the invalid backup:\n%s", r.stdout)
	}
}

// waitGone waits (bounded) until pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i == 200 {
			t.Fatalf("pid %d did not exit", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBackupNamesAndDestroy: restore and package --snapshot take the name
// backups prints, completion offers it; destroy says what is lost and the
// last good backup, and asks on a terminal (findings 6 and 7).
func TestBackupNamesAndDestroy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	r := h.run("destroy", "--force")
	if r.code != 0 || !strings.Contains(r.stdout, "its root file system and /workspace are lost, and there is no backup of "+boxtest.Machine) {
		t.Fatalf("destroy without a backup: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	initBox(t, h)
	h.WriteNote("in the backup\n")
	dir := strings.TrimSpace(mustRun(t, h, "snapshot", "named").stdout)
	name := strings.TrimSuffix(filepath.Base(dir), ".hermesbox")
	for _, args := range [][]string{{"__complete", "restore", ""}, {"__complete", "package", "--snapshot", ""}, {"__complete", "backups", "delete", ""}} {
		if r := h.run(args...); r.code != 0 || !strings.Contains(r.stdout, filepath.Base(dir)+"\n") {
			t.Errorf("%v does not offer the backup's name: %q", args, r.stdout)
		}
	}
	if r := h.run("restore", "no-such-backup"); r.code != 1 || !strings.Contains(r.stderr, "no backup named no-such-backup in ") ||
		!strings.Contains(r.stderr, "next: hermes-box backups lists the backups by name") {
		t.Errorf("restore of an unknown name: %d\n%s", r.code, r.stderr)
	}
	r = mustRun(t, h, "package", "--snapshot", name, "byname")
	if archive := strings.TrimSpace(r.stdout); !strings.Contains(filepath.Base(archive), "byname") {
		t.Errorf("package --snapshot NAME: %q", archive)
	}
	h.WriteNote("after the backup\n")
	mustRun(t, h, "restore", name)
	if got := h.ReadNote(); got != "in the backup\n" {
		t.Errorf("restore NAME did not restore the backup: the note is %q", got)
	}

	// On a terminal, destroy asks; no answer destroys nothing.
	needScript(t)
	code, out := h.runTTY("destroy.typescript", "destroy")
	if code != 1 || !strings.Contains(out, "destroy "+boxtest.Machine+"? its root file system and /workspace are lost since its last good backup ") ||
		!strings.Contains(out, "[y/N]") || !strings.Contains(out, "nothing destroyed") || h.Machines()[boxtest.Machine] == "" {
		t.Errorf("destroy on a terminal: %d\n%s", code, out)
	}
	r = mustRun(t, h, "destroy", "--force")
	// The newest good backup is now restore's safety snapshot.
	m := regexp.MustCompile(`lost since its last good backup (` + boxtest.Machine + `-\S+-pre-restore)\.hermesbox, taken \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ minutes? ago\) \(hermes-box restore (\S+) brings it back\)`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] != m[2] {
		t.Errorf("destroy --force does not say what is lost and the last good backup:\n%s", r.stdout)
	}
}

// TestHostKeyRepin: a host key that no longer matches the pin is said with
// the re-pin verb (not OpenSSH's advice), and hostkey repin reads the key
// out of band and pins it (finding 4).
func TestHostKeyRepin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	pin := filepath.Join(h.Root, "state", "hostkeys", boxtest.Machine+".pub")
	good := boxtest.ReadFile(t, pin)
	// Another key stands in for a pin the box no longer matches.
	h.Write("state/hostkeys/"+boxtest.Machine+".pub", boxtest.ReadFile(t, filepath.Join(h.Root, "state", "hermes-box-ed25519.pub")))
	expectFailure(t, "ssh with a mismatched pin", h.run("ssh", "--", "true"), 1,
		[]string{"the box's SSH host key is not the one pinned when it was created", "next: if the box was re-created or restored outside hermes-box, re-pin its key (read out of band, not over SSH): hermes-box hostkey repin"},
		"REMOTE HOST IDENTIFICATION", "known_hosts")
	if r := h.run("hostkey", "repin"); r.code != 2 || !strings.Contains(r.stderr, "pass --yes to pin it off a terminal") {
		t.Errorf("hostkey repin off a terminal without --yes: %d\n%s", r.code, r.stderr)
	}
	if got := boxtest.ReadFile(t, pin); string(got) == string(good) {
		t.Fatal("the refused repin changed the pin")
	}
	r := mustRun(t, h, "hostkey", "repin", "--yes")
	if !regexp.MustCompile(`^pinned SHA256:\S+ \(was SHA256:\S+\)\n$`).MatchString(r.stdout) || !slicesContain(boxtest.Lines(r.calls), `machine exec --stream --name `+boxtest.Machine) {
		t.Errorf("hostkey repin --yes: %q %v", r.stdout, boxtest.Lines(r.calls))
	}
	if got := boxtest.ReadFile(t, pin); string(got) != string(good) {
		t.Errorf("the re-pinned key is not the box's: %s", got)
	}
	mustRun(t, h, "ssh", "--", "true")
	if r := mustRun(t, h, "hostkey", "repin"); !strings.Contains(r.stdout, "nothing to change") {
		t.Errorf("hostkey repin of a matching pin: %q", r.stdout)
	}
	mustRun(t, h, "stop")
}

// slicesContain reports whether a line of ls starts with prefix.
func slicesContain(ls []string, prefix string) bool {
	for _, l := range ls {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestStartWaitShowsLifeAndStopsWithTheConsole is the terminal recording
// (script(1)) of a start whose guest never comes up: heartbeat lines (what
// is awaited, for how long, the bound), then, once the machine stops, the
// tail of its console at once instead of the rest of the startup deadline
// (finding 1).
func TestStartWaitShowsLifeAndStopsWithTheConsole(t *testing.T) {
	t.Parallel()
	needScript(t)
	h := newHarness(t)
	initBox(t, h)
	mustRun(t, h, "stop")
	// The guest's sshd never answers: the published port leads nowhere.
	h.Extra = []string{"HBX_TEST_TIMING=fast-watch", "FAKESMOLVM_GUEST_22=127.0.0.1:" + strconv.Itoa(sshdtest.FreePort(t))}
	record := filepath.Join(t.TempDir(), "start.typescript")
	cmd := exec.CommandContext(t.Context(), "script", "-q", "-e", "-f", "-c",
		"stty cols 120 rows 40 && exec "+shellQuote(bins.hermesBox)+" start", record)
	cmd.Env = append(append(append([]string(nil), h.Env...), h.Extra...), "TERM=xterm-256color")
	boxtest.Must(t, cmd.Start())
	beats := regexp.MustCompile(`waiting for the agent of hermes-box to report healthy: [0-9.]+s so far, giving up after 30\.0s`)
	for i := 0; len(beats.FindAllString(string(readIfAny(record)), -1)) < 2; i++ {
		if i == 600 {
			cmd.Process.Kill()
			t.Fatalf("no two heartbeat lines in 60 s:\n%s", readIfAny(record))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The guest dies: its last words on the console, then the VM is gone.
	var rec struct {
		EntryPID int `json:"entry_pid"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(h.State, "machines", boxtest.Machine, "machine.json")), &rec))
	console, err := os.OpenFile(filepath.Join(h.State, "machines", boxtest.Machine, "data", "agent-console.log"), os.O_APPEND|os.O_WRONLY, 0)
	boxtest.Must(t, err)
	_, err = console.WriteString("[   42.000000] Kernel panic - not syncing: stand-in for a guest that died\n")
	boxtest.Must(t, err)
	boxtest.Must(t, console.Close())
	killed := time.Now()
	boxtest.Must(t, syscall.Kill(rec.EntryPID, syscall.SIGKILL))
	err = cmd.Wait()
	took := time.Since(killed)
	out := string(boxtest.ReadFile(t, record))
	if dir := os.Getenv("HBX_RECORD_DIR"); dir != "" {
		boxtest.Must(t, os.WriteFile(filepath.Join(dir, "start-stopped-machine.typescript"), []byte(out), 0o644))
	}
	t.Logf("hermes-box ended %v after the machine stopped (startup deadline 30 s); the recording:\n%s", took.Round(time.Millisecond), out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("start exited %v, want status 1", err)
	}
	for _, want := range []string{"the machine stopped: hermes-box is stopped after ", " of waiting for the agent of hermes-box to report healthy",
		"the last lines of its console (", "agent-console.log):", "| [   42.000000] Kernel panic - not syncing: stand-in for a guest that died",
		"next: the console above says why it stopped; hermes-box start tries again"} {
		if !strings.Contains(out, want) {
			t.Errorf("the recording lacks %q", want)
		}
	}
	// The machine check ended the wait, not the startup deadline.
	if strings.Contains(out, "was not healthy within") {
		t.Errorf("the wait ran to its deadline instead of seeing the machine stop")
	}
}

// readIfAny is the file's content, or nothing while it does not exist.
func readIfAny(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// TestSettingsRecordedAndDrift: what the box was created with is recorded
// and is what status reports and every command uses; a configuration that
// differs is named, with what applies it, before start waits on anything;
// re-creating the box from a backup of itself applies it (finding 2).
func TestSettingsRecordedAndDrift(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	created := "127.0.0.1:" + strconv.Itoa(h.Port)
	other := sshdtest.FreePort(t)
	h.Extra = []string{"HERMES_BOX_SSH_PORT=" + strconv.Itoa(other), "HERMES_BOX_CPUS=2"}
	wantDrift := []string{
		"HERMES_BOX_SSH_PORT is " + strconv.Itoa(other) + " in the configuration, but the box was created with " + strconv.Itoa(h.Port) + " and keeps it",
		"HERMES_BOX_CPUS is 2 in the configuration, but the box was created with 4 and keeps it",
		"to apply them, re-create the box from a backup of itself — hermes-box snapshot before-change, hermes-box destroy --force, then hermes-box restore",
	}
	r := h.run("status")
	if r.code != 0 || !regexpMatch(`(?m)^hermes-box\s+healthy\s+4\s+8192 MiB\s+`+regexp.QuoteMeta(created)+`\s+full\s`, r.stdout) {
		t.Fatalf("status with a changed configuration does not report what the box was created with: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range wantDrift {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status does not name the difference %q:\n%s", w, r.stdout)
		}
	}
	// executor status reports the box as it was created: without it.
	drift := h.Extra
	h.Extra = append(append([]string(nil), drift...), "HERMES_BOX_EXECUTOR_ENABLED=true")
	r = h.run("executor", "status", "--json")
	var ex struct{ Enabled *bool }
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil || ex.Enabled == nil || *ex.Enabled {
		t.Errorf("executor status of a box created without the Executor, now configured with it: %v %q %s", err, r.stdout, r.stderr)
	}
	h.Extra = drift
	mustRun(t, h, "stop")
	r = mustRun(t, h, "start")
	warn, listener := strings.Index(r.stderr, wantDrift[0]), strings.Index(r.stderr, "[listener]")
	if warn < 0 || listener < 0 || warn > listener || !strings.Contains(r.stderr, "SSH of hermes-box on "+created) {
		t.Errorf("start does not name the difference before it waits, or waits on the configured port:\n%s", r.stderr)
	}
	mustRun(t, h, "logs", "-n", "1")
	var st struct {
		Box struct {
			Ports []int `json:"ports"`
		} `json:"box"`
		Drift []string `json:"configDrift"`
	}
	r = h.run("status", "--json")
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &st))
	if len(st.Box.Ports) != 1 || st.Box.Ports[0] != h.Port || len(st.Drift) != 2 {
		t.Errorf("status --json: ports %v drift %q", st.Box.Ports, st.Drift)
	}
	// The way it names applies the configuration, keeping the box's files.
	h.WriteNote("kept\n")
	name := strings.TrimSuffix(filepath.Base(strings.TrimSpace(mustRun(t, h, "snapshot", "before-change").stdout)), ".hermesbox")
	mustRun(t, h, "destroy", "--force")
	mustRun(t, h, "restore", name)
	r = h.run("status")
	if r.code != 0 || !regexpMatch(`(?m)^hermes-box\s+healthy\s+2\s+8192 MiB\s+127\.0\.0\.1:`+strconv.Itoa(other)+`\s`, r.stdout) ||
		strings.Contains(r.stdout, "settings") || h.ReadNote() != "kept\n" {
		t.Errorf("after re-creating from the backup: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustRun(t, h, "stop")
}

// TestFailedAndInterruptedBackupsSayWhereTheBoxIs: a failed restore and an
// interrupted snapshot end with the state of the box and the next command;
// the safety snapshots restores left are named with their size and how to
// delete them (finding 3).
func TestFailedAndInterruptedBackupsSayWhereTheBoxIs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	name := strings.TrimSuffix(filepath.Base(strings.TrimSpace(mustRun(t, h, "snapshot", "b").stdout)), ".hermesbox")
	h.Extra = []string{"FAKESMOLVM_FAIL=machine create"}
	r := h.run("restore", name)
	h.Extra = nil
	safety := regexp.MustCompile(`restores left 1 safety snapshot\(s\) of the box before them: (` + boxtest.Machine + `-\S+-pre-restore) \(added [0-9.]+ (?:B|KiB|MiB) to the store; restores to [0-9.]+ (?:B|KiB|MiB)\); once the box is as you want it, delete one with hermes-box backups delete NAME \(--force when it is the box's last good backup\)`)
	m := safety.FindStringSubmatch(r.stderr)
	expectFailure(t, "a restore whose candidate fails", r, 1, []string{"candidate failed, original kept", "\nthe box now: hermes-box is running, as it was; restores left 1 safety snapshot"})
	if m == nil {
		t.Fatalf("the failed restore does not name its safety snapshot with its size:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(h.Root, "backups", m[1]+".hermesbox")); err != nil {
		t.Errorf("the named safety snapshot is not there: %v", err)
	}
	// How it says to delete it works.
	mustRun(t, h, "backups", "delete", m[1])

	// A snapshot interrupted in its stream.
	f := h.Hostile("snapshot.chunks", "hang")
	r = h.runInterrupted(f+".reached", "snapshot", "x")
	boxtest.Must(t, os.Remove(f))
	if r.code != 130 || !strings.Contains(r.stderr, "snapshot interrupted") || !strings.Contains(r.stderr, "\nthe box now: hermes-box is running, as it was") ||
		!strings.Contains(r.stderr, "\nnext: hermes-box status shows it is healthy; then run hermes-box snapshot again") {
		t.Errorf("an interrupted snapshot: %d\n%s", r.code, r.stderr)
	}
	mustRun(t, h, "stop")
}
