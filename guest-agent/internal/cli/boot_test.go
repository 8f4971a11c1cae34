package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// bootRoot writes a minimal box root: accounts (hermes is the test's own
// user, so no chown is needed), a workspace seed and a program table with
// two programs: a stand-in sshd (this test binary listening on addr) and a
// "hermes" that sleeps.
func bootRoot(t *testing.T, addr string) (root, table string) {
	t.Helper()
	root = t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	files := map[string]string{
		"etc/passwd":                   fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nhermes:x:%d:%d::/home/hermes:/bin/sh\n", uid, gid),
		"etc/group":                    fmt.Sprintf("root:x:0:\nhermes:x:%d:\n", gid),
		boxlayout.SeedID:               "seed-1\n",
		boxlayout.SeedArchive:          seedTar(t),
		"usr/sbin/placeholder-for-dir": "",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(root, "usr/sbin/test-sshd")); err != nil {
		t.Fatal(err)
	}
	tbl := boot.Table{
		Programs: []supervise.Program{{
			Name: "sshd", Command: []string{"/usr/sbin/test-sshd", addr}, Priority: 10, AutoStart: true,
			Env: []string{helperEnv + "=listen"}, StartRetries: supervise.DefaultStartRetries, StopWait: supervise.DefaultStopWait,
			Log: supervise.Log{Path: boxlayout.LogDir + "/sshd.log", MaxBytes: 1 << 20, Backups: 1},
		}, {
			Name: "hermes", Command: []string{"sleep", "1000"}, User: "hermes", Dir: boxlayout.WorkDir,
			Priority: 40, AutoStart: true, StopWait: supervise.DefaultStopWait,
			Log: supervise.Log{Path: boxlayout.LogDir + "/hermes-gateway.log", MaxBytes: 1 << 20, Backups: 1},
		}},
		Checks: []probe.CheckSpec{{Code: health.CheckSSHD, TCP: addr}, {Code: health.CheckHermesGateway, Service: "hermes"}},
	}
	if os.Geteuid() != 0 {
		tbl.Programs[1].User = "" // setgroups needs root
	}
	b, _ := json.Marshal(tbl)
	table = filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(table, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return root, table
}

// seedTar is a small workspace seed owned by the test's user.
func seedTar(t *testing.T) string {
	t.Helper()
	entries := []tartest.Entry{
		tartest.Dir("hermes-home/"), tartest.File("hermes-home/config.yaml", "model: x\n"),
		tartest.Dir("work/"), tartest.File("work/README", "hello\n"),
	}
	for i := range entries {
		entries[i].UID, entries[i].GID = os.Getuid(), os.Getgid()
	}
	return string(tartest.Tar(t, entries))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBoot runs the agent's boot in a child process.
func startBoot(t *testing.T, root, table string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.CommandContext(t.Context(), exe, "--root", root, "boot", "--table", table)
	cmd.Env = append(os.Environ(), agentMainEnv+"=1")
	stopGently(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	return cmd, &stderr
}

// stopGently makes the end of the test's context stop a booted agent with
// SIGTERM, as the supervisor expects, so that it stops its services: a SIGKILL
// would leave them running as orphans after the test.
func stopGently(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
}

// relayJSON runs argv through the relay in-process and decodes stdout.
func relayJSON(t *testing.T, root string, v any, argv ...string) int {
	t.Helper()
	code, out, errs := run(t, request(argv...), "--root", root, "relay")
	if code == 0 {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%v: %v in %q (stderr %s)", argv, err, out, errs)
		}
	}
	return code
}

func services(t *testing.T, root string) map[string]health.Service {
	t.Helper()
	var out servicesOutput
	if code := relayJSON(t, root, &out, "services", "status", "--json"); code != 0 {
		return nil
	}
	m := map[string]health.Service{}
	for _, s := range out.Services {
		m[s.Name] = s.Service
	}
	return m
}

func waitServices(t *testing.T, root string, what string, cond func(map[string]health.Service) bool) map[string]health.Service {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := services(t, root)
		if m != nil && cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last status %v", what, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func bothRunning(m map[string]health.Service) bool {
	return m["sshd"].State == health.ServiceRunning && m["hermes"].State == health.ServiceRunning
}

func TestBootPreparesAndSupervises(t *testing.T) {
	addr := freeAddr(t)
	root, table := bootRoot(t, addr)
	cmd, stderr := startBoot(t, root, table)
	svcs := waitServices(t, root, "both programs RUNNING", bothRunning)
	sshdLog := filepath.Join(root, boxlayout.LogDir, "sshd.log")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(sshdLog); strings.Contains(string(b), "listening on") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stand-in sshd never listened")
		}
	}

	// Preparation: one startup-log line per step, in order; seed and keys.
	log, err := os.ReadFile(filepath.Join(root, boxlayout.StartupLog))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	steps := boot.Steps()
	if len(lines) != len(steps) {
		t.Fatalf("startup log has %d lines, want %d:\n%s", len(lines), len(steps), log)
	}
	for i, s := range steps {
		if !strings.Contains(lines[i], " stage="+s.Name+" ") || strings.Contains(lines[i], "failed") {
			t.Errorf("line %d %q, want stage %s", i, lines[i], s.Name)
		}
	}
	for _, p := range []string{"workspace/work/README", "workspace/hermes-home/config.yaml", boxlayout.RestoredID, "etc/ssh/ssh_host_ed25519_key"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("after boot: %v", err)
		}
	}

	// health --json through the relay: every service and the checks.
	var r health.Report
	if code := relayJSON(t, root, &r, "health", "--json"); code != 0 {
		t.Fatalf("health exit %d", code)
	}
	if len(r.Services) != 2 {
		t.Fatalf("health services %+v, want sshd and hermes", r.Services)
	}
	for _, code := range []health.Code{health.CheckSSHD, health.CheckHermesGateway, health.CheckSupervisor} {
		if c := r.Checks[code]; c.Status != health.StatusHealthy {
			t.Errorf("check %s: %s %q, want healthy", code, c.Status, c.Message)
		}
	}

	// Control through the relay: restart gives a new pid, stop stops.
	var out servicesOutput
	if code := relayJSON(t, root, &out, "services", "restart", "--json", "hermes"); code != 0 {
		t.Fatalf("restart exit %d", code)
	}
	after := services(t, root)
	if after["hermes"].State != health.ServiceRunning || after["hermes"].PID == svcs["hermes"].PID {
		t.Fatalf("after restart %+v (before pid %d)", after["hermes"], svcs["hermes"].PID)
	}
	if code, _, errs := run(t, request("services", "stop", "hermes"), "--root", root, "relay"); code != 0 {
		t.Fatalf("stop: %s", errs)
	}
	if st := services(t, root)["hermes"]; st.State != health.ServiceStopped || alive(after["hermes"].PID) {
		t.Fatalf("after stop %+v", st)
	}
	if code, out, errs := run(t, request("logs", "sshd", "-n", "1"), "--root", root, "relay"); code != 0 || out != "listening on "+addr+"\n" {
		t.Fatalf("logs sshd: exit %d, %q, %s", code, out, errs)
	}
	if code, _, _ := run(t, request("services", "start", "nope"), "--root", root, "relay"); code != 1 {
		t.Fatalf("start of an unknown service: exit %d, want 1", code)
	}

	// SIGTERM: an orderly stop, the programs gone, exit 0.
	sshdPID := services(t, root)["sshd"].PID
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("boot: %v\n%s", err, stderr)
	}
	if alive(sshdPID) {
		t.Fatalf("sshd %d outlived boot", sshdPID)
	}
	if _, err := os.Stat(filepath.Join(root, "run/hermes-box/agent.sock")); err == nil {
		t.Error("control socket left behind")
	}
}

func TestHealthWithoutBoot(t *testing.T) {
	root := t.TempDir()
	var r health.Report
	if code := relayJSON(t, root, &r, "health", "--json"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	c := r.Checks[health.CheckSupervisor]
	if len(r.Services) != 0 || c.Status != health.StatusUnhealthy || !strings.Contains(c.Message, "no supervisor is running") || r.Status != health.StatusUnhealthy {
		t.Fatalf("got services %v, supervisor check %+v, status %s", r.Services, c, r.Status)
	}
	if code, _, errs := run(t, request("services", "status"), "--root", root, "relay"); code != 1 || !strings.Contains(errs, "no supervisor is running") {
		t.Fatalf("services status without boot: exit %d %s", code, errs)
	}
}

func TestBootRefusesABadTable(t *testing.T) {
	table := filepath.Join(t.TempDir(), "t.json")
	os.WriteFile(table, []byte(`{"programs":[{"name":"x","command":["true"],"autorestart":"maybe"}]}`), 0o600)
	code, _, errs := run(t, "", "--root", t.TempDir(), "boot", "--table", table)
	if code != 2 || !strings.Contains(errs, "programs[0]") || !strings.Contains(errs, "autorestart") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	return !strings.HasPrefix(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0], "Z")
}
