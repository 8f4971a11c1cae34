package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// BenchmarkStatusWholeProcess runs the built `hermes-box status --json` as a
// whole process against the fake smolvm and Debian's sshd in the running
// box, configured as the product's guest (productGuest: the drop-in, PAM,
// `sudo -n`, the real agent), and in the same rounds the baseline:
// OpenSSH's client spawned for the agent's `health --json` alone (a
// handshake, a session, sudo, the agent).
// It reports both medians in milliseconds, their ratio, and the status
// process's CPU time (its own and its children's, the fake smolvm's runs).
// Every round checks its output: a healthy report that decodes with
// shared/health, and the agent's report from the baseline. With
// HBX_BENCH_BASELINE_HERMES_BOX naming another build of hermes-box (the
// previous commit's, say), that one takes its turn in every round too.
func BenchmarkStatusWholeProcess(b *testing.B) {
	const sshPath = "/usr/bin/ssh"
	if _, err := os.Stat(sshPath); err != nil {
		b.Skipf("%s is missing (install openssh-client)", sshPath)
	}
	h := newHarness(b)
	productGuest(b, h)
	baseline := h.openSSHHealth(b, sshPath)
	other := os.Getenv("HBX_BENCH_BASELINE_HERMES_BOX")
	var status, spawn, cpu, prev []float64
	for b.Loop() {
		wall, used := h.timedStatus(b, bins.hermesBox)
		status, cpu = append(status, wall), append(cpu, used)
		spawn = append(spawn, timed(b, baseline))
		if other != "" {
			wall, _ := h.timedStatus(b, other)
			prev = append(prev, wall)
		}
	}
	b.ReportMetric(median(status), "status-ms")
	b.ReportMetric(median(cpu), "status-cpu-ms")
	b.ReportMetric(median(spawn), "openssh-health-ms")
	b.ReportMetric(median(status)/median(spawn), "status/openssh-health")
	if other != "" {
		b.ReportMetric(median(prev), "baseline-status-ms")
		b.ReportMetric(median(status)/median(prev), "status/baseline-status")
	}
}

// productGuest initialises the box with the guest side as the product
// configures it: sshd reads the agent's drop-in and Ubuntu's main
// configuration (PAM included) before the test's lines, the relay's
// remote command runs the agent through `sudo -n`, and that agent is the
// real one (not the test agent, which adds a process to every call).
func productGuest(b testing.TB, h *harness) {
	if err := exec.CommandContext(b.Context(), "sudo", "-n", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("sudo -n: %v", err)
		}
		b.Skipf("sudo -n does not run here (%v): the benchmark measures the production relay command", err)
	}
	dropIn := filepath.Join(h.Images, "ubuntu_24.04", filepath.FromSlash(boxtest.DropInPath))
	boxtest.Must(b, os.MkdirAll(filepath.Dir(dropIn), 0o755))
	boxtest.Must(b, os.WriteFile(dropIn, []byte(h.ModuleFile("guest-agent/internal/provision/files/sshd-hermes-box.conf")), 0o644))
	initBox(b, h)
	root := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	// The real agent in place of the test agent, renamed over it (the
	// running boot keeps its own file).
	agent := filepath.Join(root, filepath.FromSlash(boxlayout.AgentPath))
	boxtest.Must(b, os.WriteFile(agent+".new", boxtest.ReadFile(b, bins.Agent), 0o755))
	boxtest.Must(b, os.Rename(agent+".new", agent))
	h.Extra = append(h.Extra, "HBX_TEST_RELAY_COMMAND=sudo -n "+boxtest.GuestRelayCommand)
	// The benchmark checks that sshd runs the product's configuration.
	config := string(boxtest.ReadFile(b, filepath.Join(root, "run", "hbx-test-sshd", "sshd_config")))
	if !strings.HasPrefix(config, "# Written by hermes-box-agent provision.") || !strings.Contains(config, "\nUsePAM yes\n") {
		b.Fatalf("the box's sshd does not run the product's configuration:\n%s", config)
	}
}

// timedStatus runs `bin status --json` once and checks its report; it
// returns the wall and CPU milliseconds of the whole process.
func (h *harness) timedStatus(b *testing.B, bin string) (wall, used float64) {
	cmd := h.command(b.Context(), "status", "--json")
	cmd.Path, cmd.Args[0] = bin, bin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall = ms(time.Since(start))
	if err != nil {
		b.Fatalf("status: %v\n%s", err, stderr.Bytes())
	}
	r, err := health.Decode(stdout.Bytes())
	if err != nil || r.Status != health.StatusHealthy || r.Agent.Version == "" {
		b.Fatalf("status --json: %v, report %+v\n%s", err, r, stderr.Bytes())
	}
	used = ms(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime())
	return wall, used
}

// openSSHHealth returns the baseline command's runner: the system ssh
// client with the project key and the pinned host key, running the box's
// agent's `health --json`.
func (h *harness) openSSHHealth(b *testing.B, sshPath string) func(context.Context) error {
	knownHosts := filepath.Join(b.TempDir(), "known_hosts")
	boxtest.Must(b, keys.WriteKnownHosts(knownHosts, "127.0.0.1", h.Port, h.SSHD.HostKey))
	agent := `sudo -n "$` + boxtest.GuestRootEnv + `"` + boxlayout.AgentPath + ` --root "$` + boxtest.GuestRootEnv + `"`
	args := []string{
		"-F", os.DevNull, "-i", filepath.Join(h.Root, "state", "hermes-box-ed25519"), "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=" + os.DevNull,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		"-p", strconv.Itoa(h.Port), h.SSHD.User + "@127.0.0.1", agent + " health --json",
	}
	var env []string
	for _, kv := range h.Env {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	return func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, sshPath, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			_, err = health.Decode(out)
		}
		if err != nil {
			b.Fatalf("ssh health --json: %v\n%s", err, stderr.Bytes())
		}
		return nil
	}
}

// timed runs fn once and returns its wall milliseconds.
func timed(b *testing.B, fn func(context.Context) error) float64 {
	start := time.Now()
	if err := fn(b.Context()); err != nil {
		b.Fatal(err)
	}
	return ms(time.Since(start))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
