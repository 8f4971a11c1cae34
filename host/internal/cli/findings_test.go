package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
		{name: "label too long", args: []string{"snapshot", strings.Repeat("x", 65)}, code: 2, noCalls: true,
			want: []string{"the label is 65 characters long; a label has at most 64"}},
		{name: "package of an empty backup name", args: []string{"package", "--snapshot", ""}, code: 2, noCalls: true,
			want: []string{"a backup is needed: a name `hermes-box backups` prints, or a path"}},
		{name: "no smolvm: status", extra: []string{"PATH=" + t.TempDir()}, args: []string{"status"}, code: 1,
			want: []string{"smolvm is not installed (or not on PATH)", "next: install it: " + pins.SmolvmInstallCommand(pins.SmolvmRecommended)}},
		{name: "unsupported smolvm", extra: []string{"FAKESMOLVM_VERSION=1.2.3"}, args: []string{"init"}, code: 1,
			want: []string{"smolvm 1.2.3 is not a release hermes-box supports (it supports " + pins.SmolvmTableVersions() + ")",
				"next: install smolvm " + pins.SmolvmRecommended + ": " + pins.SmolvmInstallCommand(pins.SmolvmRecommended), "HERMES_BOX_SMOLVM_ALLOW_NEWER=true"},
			refused: []string{"LAN+host", "strict floor var"}},
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
	conf := string(readFile(t, filepath.Join(h.root, "hermes-box.conf")))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.extra = tt.extra
			if tt.conf != "" {
				h.write("hermes-box.conf", tt.conf)
				defer h.write("hermes-box.conf", conf)
			}
			r := h.run(tt.args...)
			expectFailure(t, strings.Join(tt.args, " "), r, tt.code, tt.want, tt.refused...)
			if tt.noCalls && len(r.calls) > 0 {
				t.Errorf("%v did work before refusing: %v", tt.args, lines(r.calls))
			}
		})
	}
}

// TestBuilderRefusesCPUs: a CPU count smolvm refuses names the setting, not
// a re-run that fails the same way (finding 4).
func TestBuilderRefusesCPUs(t *testing.T) {
	h := newHarness(t)
	h.extra = []string{"HERMES_BOX_CPUS=64", "FAKESMOLVM_FAIL=machine start@" + builder,
		"FAKESMOLVM_FAIL_MESSAGE=failed to start the VM: 64 vCPUs requested, the host has 2"}
	r := h.run("init")
	expectFailure(t, "init with 64 CPUs", r, 1,
		[]string{"64 vCPUs requested", "next: smolvm refused HERMES_BOX_CPUS=64 (this host has", "set a smaller HERMES_BOX_CPUS in " + filepath.Join(h.root, "hermes-box.conf")},
		"re-run hermes-box init: it is safe")
}

// TestErrorClassesOfABox: a refused connection, the operation lock (which
// operation, which pid), a corrupt backup failing backups --verify, and
// status --json answering the help's own example for a stopped box
// (findings 4, 8, 9).
func TestErrorClassesOfABox(t *testing.T) {
	h := newHarness(t)
	initBox(t, h)

	// The published port stops answering while the machine runs.
	var rec struct{ PID int }
	must(t, json.Unmarshal(readFile(t, filepath.Join(h.state, "machines", machine, "machine.json")), &rec))
	must(t, syscall.Kill(rec.PID, syscall.SIGKILL))
	waitGone(t, rec.PID)
	expectFailure(t, "logs with nothing on the port", h.run("logs"), 1,
		[]string{"nothing answers on the box's SSH port (connection refused)", "next: hermes-box status says whether the box runs"})
	mustRun(t, h, "restart")

	// A start hangs in smolvm while it holds the operation lock.
	mustRun(t, h, "stop")
	must(t, os.WriteFile(filepath.Join(h.state, "hang"), []byte("machine start\n"), 0o644))
	cmd := h.command(t.Context(), "start")
	must(t, cmd.Start())
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(h.state, "hang.reached")); err == nil {
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
	must(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	must(t, os.Remove(filepath.Join(h.state, "hang")))

	// status --json, as the help's example reads it, for a stopped box.
	help := h.run("status", "--help").stdout
	m := regexp.MustCompile(`hermes-box status --json \| jq -r (\.\w+)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("status --help has no jq example:\n%s", help)
	}
	r = h.run("status", "--json")
	var st map[string]any
	must(t, json.Unmarshal([]byte(r.stdout), &st))
	if got := st[strings.TrimPrefix(m[1], ".")]; r.code != 3 || got != "stopped" {
		t.Errorf("status --json | jq -r %s of a stopped box: %v (exit %d)", m[1], got, r.code)
	}

	// A corrupt backup fails backups --verify.
	backup := strings.TrimSpace(mustRun(t, h, "snapshot", "good").stdout)
	mustRun(t, h, "backups", "--verify")
	part := filepath.Join(backup, "workspace.tar.gz")
	b := readFile(t, part)
	b[len(b)/2] ^= 0xff
	must(t, os.WriteFile(part, b, 0o644))
	r = h.run("backups", "--verify")
	expectFailure(t, "backups --verify with a corrupt backup", r, 1, []string{"1 of 1 backups are invalid: " + filepath.Base(backup)})
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
	h := newHarness(t)
	initBox(t, h)
	r := h.run("destroy", "--force")
	if r.code != 0 || !strings.Contains(r.stdout, "its root file system and /workspace are lost, and there is no backup of "+machine) {
		t.Fatalf("destroy without a backup: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	initBox(t, h)
	h.writeNote("in the backup\n")
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
	h.writeNote("after the backup\n")
	mustRun(t, h, "restore", name)
	if got := h.readNote(); got != "in the backup\n" {
		t.Errorf("restore NAME did not restore the backup: the note is %q", got)
	}

	// On a terminal, destroy asks; no answer destroys nothing.
	if _, err := exec.LookPath("script"); err == nil || os.Getenv("CI") == "true" {
		code, out := h.runTTY("destroy.typescript", "destroy")
		if code != 1 || !strings.Contains(out, "destroy "+machine+"? its root file system and /workspace are lost since its last good backup ") ||
			!strings.Contains(out, "[y/N]") || !strings.Contains(out, "nothing destroyed") || h.machines()[machine] == "" {
			t.Errorf("destroy on a terminal: %d\n%s", code, out)
		}
	}
	r = mustRun(t, h, "destroy", "--force")
	// The newest good backup is now restore's safety snapshot.
	m := regexp.MustCompile(`lost since its last good backup (` + machine + `-\S+-pre-restore)\.hermesbox, taken \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ minutes? ago\) \(hermes-box restore (\S+) brings it back\)`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] != m[2] {
		t.Errorf("destroy --force does not say what is lost and the last good backup:\n%s", r.stdout)
	}
}

// TestHostKeyRepin: a host key that no longer matches the pin is said with
// the re-pin verb (not OpenSSH's advice), and hostkey repin reads the key
// out of band and pins it (finding 4).
func TestHostKeyRepin(t *testing.T) {
	h := newHarness(t)
	initBox(t, h)
	pin := filepath.Join(h.root, "state", "hostkeys", machine+".pub")
	good := readFile(t, pin)
	// Another key stands in for a pin the box no longer matches.
	h.write("state/hostkeys/"+machine+".pub", readFile(t, filepath.Join(h.root, "state", "hermes-box-ed25519.pub")))
	expectFailure(t, "ssh with a mismatched pin", h.run("ssh", "--", "true"), 1,
		[]string{"the box's SSH host key is not the one pinned when it was created", "next: if the box was re-created or restored outside hermes-box, re-pin its key (read out of band, not over SSH): hermes-box hostkey repin"},
		"REMOTE HOST IDENTIFICATION", "known_hosts")
	if r := h.run("hostkey", "repin"); r.code != 2 || !strings.Contains(r.stderr, "pass --yes to pin it off a terminal") {
		t.Errorf("hostkey repin off a terminal without --yes: %d\n%s", r.code, r.stderr)
	}
	if got := readFile(t, pin); string(got) == string(good) {
		t.Fatal("the refused repin changed the pin")
	}
	r := mustRun(t, h, "hostkey", "repin", "--yes")
	if !regexp.MustCompile(`^pinned SHA256:\S+ \(was SHA256:\S+\)\n$`).MatchString(r.stdout) || !slicesContain(lines(r.calls), `machine exec --name `+machine) {
		t.Errorf("hostkey repin --yes: %q %v", r.stdout, lines(r.calls))
	}
	if got := readFile(t, pin); string(got) != string(good) {
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
