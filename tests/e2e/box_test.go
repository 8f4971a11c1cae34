package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// box is one hermes-box project driven through the real hermes-box binary,
// with the QEMU stand-in as smolvm.
type box struct {
	t       *testing.T
	e       *Env
	Project string
	Machine string
	Builder string
	SSHPort int
	env     []string
	// printed is everything hermes-box printed in this run, command by
	// command, for the secret check.
	printed []string
}

// newBox writes a project (Smolfile, the static agent under bin/,
// hermes-box.conf) and the environment hermes-box runs with: the run's,
// without any HERMES_BOX_* variable of the caller (hermes-box refuses
// unknown ones), plus the project root and the test hooks.
func newBox(t *testing.T, e *Env, art *artifactServer) *box {
	t.Helper()
	suffix := randHex(t, 3)
	b := &box{t: t, e: e, Project: t.TempDir(), Machine: "e2e-box-" + suffix, Builder: "e2e-bld-" + suffix, SSHPort: freePort(t)}
	smolfile, err := os.ReadFile(filepath.Join(e.Root, "Smolfile"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(b.Project, "Smolfile"), smolfile, 0o644)
	agent, err := os.ReadFile(filepath.Join(e.Bin, "hermes-box-agent"))
	if err != nil {
		t.Fatal(err)
	}
	// The host copies in the agent named for its own architecture; the
	// guest's (GuestArch) is built under that name.
	writeFile(t, filepath.Join(b.Project, "bin", "hermes-box-agent-linux-"+runtime.GOARCH), agent, 0o755)
	conf := fmt.Sprintf("HERMES_BOX_MACHINE_NAME=%s\nHERMES_BOX_BUILDER_NAME=%s\nHERMES_BOX_SSH_PORT=%d\n"+
		"HERMES_BOX_CPUS=2\nHERMES_BOX_MEMORY_MIB=1536\n", b.Machine, b.Builder, b.SSHPort)
	// amd64 has no pinned uv digest, so the configuration names the
	// stand-in's; arm64's is pinned (and may not be overridden), as Codex's
	// is on both, and the test pins replace the artifacts either way.
	if GuestArch() == "amd64" {
		conf += fmt.Sprintf("HERMES_BOX_UV_SHA256=%s\n", art.UVSHA256)
	}
	writeFile(t, filepath.Join(b.Project, "hermes-box.conf"), []byte(conf), 0o644)
	for _, kv := range e.environ {
		if !strings.HasPrefix(kv, "HERMES_BOX_") {
			b.env = append(b.env, kv)
		}
	}
	b.env = append(b.env, "HERMES_BOX_PROJECT_ROOT="+b.Project, "HBX_TEST_HOST=supported", "HBX_TEST_AGENT_PINS="+art.PinsDir)
	if h := netcheckHost(); h != "" {
		b.env = append(b.env, "HBX_TEST_NETCHECK_HOST="+h)
	}
	return b
}

// netcheckHost is the name the builder's netcheck resolves, or "" for the
// agent's default. The guest resolves names through QEMU's user network,
// which asks the host's DNS; the amd64 guest's default (archive.ubuntu.com)
// is a name a test network that answers only package hosts still answers,
// but arm64's (ports.ubuntu.com) may not be, and provisioning from the
// cached image fetches nothing from either. So an arm64 run probes the
// amd64 archive's name, as the amd64 run does: the route and DNS checks
// still run in the guest, only the name differs. HBX_TEST_NETCHECK_HOST in
// the caller's environment wins.
func netcheckHost() string {
	if h := os.Getenv("HBX_TEST_NETCHECK_HOST"); h != "" || GuestArch() != "arm64" {
		return h
	}
	return "archive.ubuntu.com"
}

// run runs hermes-box with args, bounded by timeout.
func (b *box) run(timeout time.Duration, args ...string) Result {
	b.t.Helper()
	return b.runWith(nil, nil, timeout, args...)
}

// runWith is run with extra environment and stdin (both may be nil).
func (b *box) runWith(env []string, stdin []byte, timeout time.Duration, args ...string) Result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), timeout)
	defer cancel()
	cmd := b.e.Command(ctx, "hermes-box", args...)
	cmd.Env, cmd.Dir = append(slices.Clone(b.env), env...), b.Project
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		b.t.Fatalf("hermes-box %s: not done after %s\nstderr:\n%s", strings.Join(args, " "), timeout, errb.String())
	}
	var ee interface{ ExitCode() int }
	if err != nil && !errors.As(err, &ee) {
		b.t.Fatalf("hermes-box %s: %v", strings.Join(args, " "), err)
	}
	b.printed = append(b.printed, "hermes-box "+strings.Join(args, " ")+"\n"+out.String()+errb.String())
	return Result{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: errb.String()}
}

// must runs hermes-box and fails the test unless it exits 0.
func (b *box) must(timeout time.Duration, args ...string) Result {
	b.t.Helper()
	r := b.run(timeout, args...)
	if r.Code != 0 {
		b.t.Fatalf("hermes-box %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, tailText(r.Stderr, 6000))
	}
	return r
}

// ssh runs one command in the box through `hermes-box ssh` and returns its
// trimmed stdout.
func (b *box) ssh(command string) string {
	b.t.Helper()
	return strings.TrimSpace(b.must(2*time.Minute, "ssh", "--", command).Stdout)
}

func tailText(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestBoxLifecycle drives the real hermes-box, the stand-in smolvm and the
// real agent in real VMs: init (provisioning offline from a loopback
// artifact server), status, the approval gate and the agent's attacks on
// it, ssh, logs, snapshot and both restore paths
// (an arm64 guest: the fresh one alone),
// and destroy, printing each phase's time.
func TestBoxLifecycle(t *testing.T) {
	e := newEnv(t)
	art := newArtifactServer(t, e)
	b := newBox(t, e, art)
	secret := b.mapSecret()
	start := time.Now()
	phase(t, "init", func() { b.checkInit(art) })
	phase(t, "secret reaches the gateway", func() { b.checkSecretDelivered(secret) })
	phase(t, "status --json", b.checkStatus)
	phase(t, "gate (real Hermes 0.19.0)", b.checkGate)
	// The attack step is not yet proven in a VM on a quiet machine (its one
	// run here, at load 15, met status's 30 s health deadline after the
	// gateway's restart): it runs when HBX_E2E_GATE_ATTACKS=1.
	if os.Getenv("HBX_E2E_GATE_ATTACKS") == "1" {
		phase(t, "gate vs attacks as hermes", b.checkGateAttacks)
	}
	phase(t, "host key", b.checkHostKey)
	phase(t, "ssh", b.checkSSH)
	phase(t, "remapped pack repaired", b.checkRepairs)
	phase(t, "supervisorctl restart hermes", b.checkSupervisorctl)
	phase(t, "logs", b.checkLogs)
	phase(t, "executor connect-hermes", b.checkConnectHermes)
	phase(t, "write workspace file", func() { b.writeNote("before the snapshot") })
	var backup string
	phase(t, "snapshot", func() { backup = b.snapshot() })
	phase(t, "change workspace file", func() { b.writeNote("after the snapshot") })
	// The replacement restore is the host's orchestration of the guest
	// verbs the fresh restore runs too (snapshot write for the safety
	// snapshot, snapshot apply for the candidate and the box): the arm64
	// guest, under TCG at about half amd64's speed, runs the fresh path
	// alone (it saves 12-15 min of CI); the amd64 run covers both.
	if GuestArch() != "arm64" {
		phase(t, "restore (replacement)", func() { b.restore(backup) })
		phase(t, "file is back", func() { b.checkNote("before the snapshot") })
		phase(t, "secret after the cut-over", func() { b.checkSecretDelivered(secret) })
	}
	phase(t, "secret in no file or backup", func() { b.checkSecretNowhere(secret) })
	phase(t, "destroy --force", b.destroy)
	phase(t, "restore (fresh)", func() { b.restore(backup) })
	phase(t, "file is back (fresh)", func() { b.checkNote("before the snapshot") })
	phase(t, "destroy --force (final)", b.destroy)
	t.Logf("phase %-28s %6.1f s", "total (after build)", time.Since(start).Seconds())
}

// checkInit runs init with JSON progress and checks that provisioning
// fetched each stand-in artifact once, found every package already
// installed (no apt network), and that only the box is left.
func (b *box) checkInit(art *artifactServer) {
	t := b.t
	r := b.must(45*time.Minute, "--log-format", "json", "init")
	steps := map[string]protocol.Event{}
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev protocol.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == protocol.EventStep && ev.State == protocol.StepDone {
			steps[ev.Step] = ev
		}
	}
	for _, s := range []string{"apt-index", "packages"} {
		ev, ok := steps[s]
		mustf(t, ok && ev.Fields["changed"] == "false", "provision step %s: %+v; want it done with nothing to change (the image holds every package)", s, ev)
	}
	for _, s := range []string{"node", "uv", "hermes", "codex-pin", "smoke", "workspace-seed"} {
		mustf(t, steps[s].Fields["changed"] == "true", "provision step %s did not change anything: %+v", s, steps[s])
	}
	art.checkFetchedOnce(t)
	mustf(t, strings.Contains(r.Stdout, "hermes-box is ready: machine "+b.Machine), "handoff:\n%s", r.Stdout)
	var ms []map[string]any
	if err := json.Unmarshal([]byte(b.e.Smolvm("machine", "ls", "--json")), &ms); err != nil {
		t.Fatal(err)
	}
	mustf(t, len(ms) == 1 && ms[0]["name"] == b.Machine && ms[0]["state"] == "running", "machines after init: %v", ms)
	mustf(t, len(b.e.QEMUProcesses()) == 1, "QEMU processes after init: %v (the builder's must be gone)", b.e.QEMUProcesses())
}

// checkStatus: status --json decodes with shared/health, is healthy, the
// loopback-only check passed, and sshd and the Hermes stand-in run.
func (b *box) checkStatus() {
	t := b.t
	r := b.must(2*time.Minute, "status", "--json")
	rep, err := health.Decode([]byte(r.Stdout))
	if err != nil {
		t.Fatalf("status --json does not decode with shared/health: %v\n%s", err, r.Stdout)
	}
	mustf(t, rep.Status == health.StatusHealthy, "status %s:\n%s", rep.Status, r.Stdout)
	lc, ok := rep.Checks["loopback-listener"]
	mustf(t, ok && lc.Status == health.StatusHealthy, "loopback-only check: %+v", lc)
	running := map[string]bool{}
	for _, s := range rep.Services {
		running[s.Name] = s.State == health.ServiceRunning
	}
	mustf(t, running["sshd"] && running["hermes"], "services: %+v", rep.Services)
	for _, c := range []health.Code{health.CheckSSHD, health.CheckHermesGateway} {
		mustf(t, rep.Checks[c].Status == health.StatusHealthy, "check %s: %+v", c, rep.Checks[c])
	}
	mustf(t, listensOnLoopbackOnly(t, b.SSHPort), "the published SSH port %d is not bound to 127.0.0.1 only", b.SSHPort)
	for _, ip := range otherAddrs(t) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(b.SSHPort)), 2*time.Second); err == nil {
			c.Close()
			t.Fatalf("the SSH port %d is reachable on %s", b.SSHPort, ip)
		}
	}
}

// checkHostKey: the key pinned by init is the one the agent reports out of
// band and the one sshd presents in an SSH handshake now.
func (b *box) checkHostKey() {
	t := b.t
	pinnedText, err := os.ReadFile(filepath.Join(b.Project, "state", "hostkeys", b.Machine+".pub"))
	if err != nil {
		t.Fatalf("pinned host key: %v", err)
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey(pinnedText)
	if err != nil {
		t.Fatal(err)
	}
	presented := presentedHostKey(t, fmt.Sprintf("127.0.0.1:%d", b.SSHPort))
	mustf(t, bytes.Equal(presented.Marshal(), pinned.Marshal()), "sshd presents %s, init pinned %s",
		ssh.FingerprintSHA256(presented), ssh.FingerprintSHA256(pinned))
	var hk protocol.HostKeys
	out := b.e.Smolvm("machine", "exec", "--name", b.Machine, "--", "/usr/local/sbin/hermes-box-agent", "hostkeys")
	if err := json.Unmarshal([]byte(out), &hk); err != nil {
		t.Fatalf("agent hostkeys: %v\n%s", err, out)
	}
	found := false
	for _, k := range hk.Keys {
		found = found || k.Fingerprint == ssh.FingerprintSHA256(pinned)
	}
	mustf(t, found, "the agent's host keys %+v do not include the pinned %s", hk.Keys, ssh.FingerprintSHA256(pinned))
}

// presentedHostKey completes an SSH key exchange with addr and returns the
// host key the server proved it holds (authentication is not attempted).
func presentedHostKey(t *testing.T, addr string) ssh.PublicKey {
	t.Helper()
	var got ssh.PublicKey
	cfg := &ssh.ClientConfig{
		User: "nobody", Timeout: 10 * time.Second,
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			got = key
			return errors.New("host key captured")
		},
	}
	_, err := ssh.Dial("tcp", addr, cfg)
	if got == nil {
		t.Fatalf("no host key from %s: %v", addr, err)
	}
	return got
}

// checkSSH: as designed (DESIGN.md, the boxadmin profile), a command over
// `hermes-box ssh` runs as boxadmin without a terminal (an interactive
// login lands in hermes' tmux); boxadmin becomes hermes with sudo -u
// hermes, and may not become root.
func (b *box) checkSSH() {
	t := b.t
	mustf(t, b.ssh("id -un") == "boxadmin", "ssh id -un")
	mustf(t, b.ssh("sudo -n -u hermes id -un") == "hermes", "ssh sudo -n -u hermes id -un")
	r := b.run(2*time.Minute, "ssh", "--", "sudo -n true")
	mustf(t, r.Code != 0, "boxadmin became root with sudo -n true")
	mustf(t, b.ssh("sudo -n -u hermes sh -c 'cd && pwd'") == "/home/hermes", "hermes' home")
}

// asRoot runs command as root in the box the way its user does: boxadmin
// becomes hermes, whose sudo is unrestricted.
func (b *box) asRoot(command string) string {
	return b.ssh("sudo -n -u hermes sudo -n " + command)
}

// checkRepairs: the runtime booted from a pack the stand-in remapped as
// smolvm does (every owner the host's 501:20, setuid bits dropped), and
// boot's repairs put it right: the startup log says so, and sudo, SSH and
// the relay (status, above) work.
func (b *box) checkRepairs() {
	t := b.t
	log := b.asRoot("cat /var/log/hermes-box-startup.log")
	for _, want := range []string{"stage=ownership-repair ok: chowned", "from 501:20 (smolvm's host mapping)", "stage=sudo-modes ok: repaired /usr/bin/sudo",
		"stage=home-ownership ok: chowned /home/boxadmin", "stage=stray-files ok: removed /",
		// Codex is not in the pack: the first boot installed it.
		"stage=codex ok: Codex "} {
		mustf(t, strings.Contains(log, want), "startup log lacks %q:\n%s", want, tailText(log, 4000))
	}
	// The first boot unpacked the standalone package from npm's tarball,
	// owned by hermes, without the voice resources.
	installed := strings.Split(b.asRoot(`sh -c 'cd /workspace/codex-home/packages/standalone/current/ && find . -mindepth 1 -printf "%P:%u\n"'`), "\n")
	slices.Sort(installed)
	mustf(t, slices.Equal(installed, codexInstalled), "the Codex release holds %q; want %q", installed, codexInstalled)
	mustf(t, b.asRoot("stat -c '%u:%g %a' /usr/bin/sudo /home/boxadmin/.ssh/authorized_keys") == "0:0 4755\n1001:1001 600", "sudo and authorized_keys after the repairs")
	// Hermes' venv is root's: the hermes user cannot drop a .pth file that
	// Python would run inside every Hermes process.
	mustf(t, b.asRoot("stat -c '%u:%g' "+venvSite) == "0:0", "owner of %s", venvSite)
	r := b.run(2*time.Minute, "ssh", "--", "sudo -n -u hermes sh -c 'echo import os > "+venvSite+"/hermes-box-e2e.pth'")
	mustf(t, r.Code != 0 && strings.Contains(r.Stderr, "Permission denied"), "the hermes user wrote into %s: exit %d %s", venvSite, r.Code, r.Stderr)
}

// venvSite is the stand-in venv's package directory (its site-packages).
const venvSite = "/usr/local/lib/hermes-agent/venv/lib/site-packages"

// checkSupervisorctl: `sudo supervisorctl restart hermes` in the box gives
// the gateway a new pid, which supervisorctl status and hermes-box status
// both show.
func (b *box) checkSupervisorctl() {
	t := b.t
	before := b.asRoot("supervisorctl pid hermes")
	out := b.asRoot("supervisorctl restart hermes")
	mustf(t, out == "hermes: stopped\nhermes: started", "supervisorctl restart hermes: %q", out)
	after := b.asRoot("supervisorctl pid hermes")
	mustf(t, after != before && after != "0", "hermes pid %s before the restart, %s after", before, after)
	st := b.asRoot("supervisorctl status hermes")
	mustf(t, strings.HasPrefix(st, "hermes") && strings.Contains(st, "RUNNING") && strings.Contains(st, "pid "+after+","), "supervisorctl status hermes: %q", st)
	r := b.must(2*time.Minute, "status", "--json")
	rep, err := health.Decode([]byte(r.Stdout))
	mustf(t, err == nil, "status --json: %v", err)
	found := false
	for _, s := range rep.Services {
		found = found || s.Name == "hermes" && s.State == health.ServiceRunning && strconv.Itoa(s.PID) == after
	}
	mustf(t, found, "hermes-box status does not show hermes RUNNING with pid %s: %+v", after, rep.Services)
	t.Logf("supervisorctl restart hermes: pid %s -> %s; status: %s", before, after, st)
}

// checkLogs: the Hermes stand-in's log came through the relay.
func (b *box) checkLogs() {
	r := b.must(2*time.Minute, "logs", "-n", "50")
	mustf(b.t, strings.Contains(r.Stdout, "hermes stand-in gateway: running as hermes in /workspace/work"), "hermes-box logs:\n%s", r.Stdout)
	r = b.must(2*time.Minute, "logs", "-n", "50", "sshd")
	mustf(b.t, r.Code == 0, "hermes-box logs sshd: %+v", r)
}

const notePath = "/workspace/work/e2e-note.txt"

func (b *box) writeNote(text string) {
	b.ssh(fmt.Sprintf("sudo -n -u hermes sh -c 'echo %s > %s'", text, notePath))
	b.checkNote(text)
}

func (b *box) checkNote(want string) {
	got := b.ssh("sudo -n -u hermes cat " + notePath)
	mustf(b.t, got == want, "%s holds %q, want %q", notePath, got, want)
}

// snapshot takes a backup and returns its directory (the last stdout line).
func (b *box) snapshot() string {
	r := b.must(30*time.Minute, "snapshot", "e2e")
	b.logSteps("snapshot", r)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	dir := lines[len(lines)-1]
	fi, err := os.Stat(dir)
	mustf(b.t, err == nil && fi.IsDir(), "backup %q: %v", dir, err)
	return dir
}

func (b *box) restore(backup string) {
	b.logSteps("restore", b.must(25*time.Minute, "restore", backup))
	b.checkStatusHealthy()
}

// logSteps logs what a long command printed of its steps (each with the
// host's elapsed time), so a slow phase in CI's log says where it went.
func (b *box) logSteps(what string, r Result) {
	b.t.Logf("hermes-box %s printed:\n%s", what, tailText(r.Stderr, 8000))
}

// checkStatusHealthy wants status --json healthy.
func (b *box) checkStatusHealthy() {
	r := b.must(2*time.Minute, "status", "--json")
	rep, err := health.Decode([]byte(r.Stdout))
	mustf(b.t, err == nil && rep.Status == health.StatusHealthy, "status after restore: %v\n%s", err, r.Stdout)
}

// destroy deletes the box; nothing of it may remain: no machine, no QEMU
// process of this run, an empty stand-in state dir.
func (b *box) destroy() {
	b.must(5*time.Minute, "destroy", "--force")
	mustf(b.t, strings.TrimSpace(b.e.Smolvm("machine", "ls", "--json")) == "[]", "machines left after destroy")
	mustf(b.t, len(b.e.QEMUProcesses()) == 0, "QEMU processes left after destroy: %v", b.e.QEMUProcesses())
	ents, err := os.ReadDir(b.e.State)
	mustf(b.t, err == nil && len(ents) == 0, "stand-in state dir not empty after destroy: %v %v", ents, err)
}
