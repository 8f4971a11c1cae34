package cli

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runAs runs the agent as if invoked under name.
func runAs(name string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := RunAs(context.Background(), name, args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// TestSupervisorctl: called as supervisorctl against a running boot, the
// agent answers status, pid, restart (a new pid), stop (exit 3 from status
// afterwards, as supervisorctl gives for a program that does not run),
// start and tail, with supervisorctl's words.
func TestSupervisorctl(t *testing.T) {
	addr := freeAddr(t)
	root, table := bootRoot(t, addr)
	startBoot(t, root, table)
	svcs := waitServices(t, root, "both programs RUNNING", bothRunning)
	// supervisorctl takes no --root, so the test passes the temp root to
	// the hermes-box-agent spelling of the same verb.
	ctl := func(args ...string) (int, string) {
		code, out, _ := run(t, "", append([]string{"--root", root, SupervisorctlName}, args...)...)
		return code, out
	}
	code, out := ctl("status")
	if code != 0 || !regexpLine(out, "hermes", "RUNNING", "pid "+strconv.Itoa(svcs["hermes"].PID)+", uptime ") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if code, out := ctl("pid", "hermes"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(svcs["hermes"].PID) {
		t.Fatalf("pid hermes: exit %d %q", code, out)
	}
	if code, out := ctl("restart", "hermes"); code != 0 || out != "hermes: stopped\nhermes: started\n" {
		t.Fatalf("restart hermes: exit %d %q", code, out)
	}
	after := services(t, root)["hermes"]
	if after.PID == svcs["hermes"].PID || after.PID == 0 {
		t.Fatalf("restart kept pid %d", after.PID)
	}
	if code, out := ctl("stop", "hermes"); code != 0 || out != "hermes: stopped\n" {
		t.Fatalf("stop: exit %d %q", code, out)
	}
	if code, out := ctl("status", "hermes"); code != exitNotRunning || !regexpLine(out, "hermes", "STOPPED", "") {
		t.Fatalf("status after stop: exit %d %q, want 3", code, out)
	}
	if code, out := ctl("start", "all"); code != 0 || out != "all: started\n" {
		t.Fatalf("start all: exit %d %q", code, out)
	}
	waitServices(t, root, "both RUNNING again", bothRunning)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out := ctl("tail", "sshd")
		if code == 0 && strings.Contains(out, "listening on "+addr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tail sshd: exit %d %q", code, out)
		}
	}
	if code, out := ctl("status", "nope"); code != exitNotRunning || !strings.Contains(out, "nope: ERROR (no such process)") {
		t.Fatalf("status nope: exit %d %q", code, out)
	}
	if code, _ := ctl("frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d, want 2", code)
	}
	// Under its own name (argv[0]), the agent is supervisorctl.
	if code, _, errs := runAs(SupervisorctlName, "frobnicate"); code != 2 || !strings.Contains(errs, "Unknown syntax") {
		t.Fatalf("as supervisorctl: exit %d %q", code, errs)
	}
}

func regexpLine(out, name, state, desc string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == name && f[1] == state && strings.Contains(l, desc) {
			return true
		}
	}
	return false
}

// TestVerbTable: names are unique, and the relay column allows exactly the
// verbs the host calls.
func TestVerbTable(t *testing.T) {
	seen := map[string]bool{}
	var relayed []string
	for _, v := range Verbs() {
		if seen[v.name] {
			t.Errorf("verb %q twice in the table", v.name)
		}
		seen[v.name] = true
		if v.relay {
			relayed = append(relayed, v.name)
		}
	}
	if got, want := strings.Join(relayed, " "), "audit executor health logs netprobe secrets services snapshot version"; got != want {
		t.Errorf("relay allow-list %q, want %q", got, want)
	}
	if code, _, errs := run(t, request("boot"), "relay"); code != 2 || !strings.Contains(errs, "not allowed through the relay") {
		t.Errorf("boot through the relay: exit %d %s", code, errs)
	}
}
