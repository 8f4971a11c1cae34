package relay

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/health"
)

// BenchmarkRelayHealth measures one `health --json` relay call on a
// long-lived connection to a local sshd: a session, the agent's start-up and
// its work, but no SSH handshake.
func BenchmarkRelayHealth(b *testing.B) {
	f := newSSHDFixture(b)
	tr := relayTo(f, f.HostKey, sudoAgent(b, f)+" relay")
	c, err := tr.Dial(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	relayHealth(b, c)
	loopHealth(b, c)
}

// BenchmarkRelayHealthDial measures one `health --json` relay call that
// dials its own connection, as one `hermes-box status` does: the SSH
// handshake in-process plus everything BenchmarkRelayHealth measures.
func BenchmarkRelayHealthDial(b *testing.B) {
	f := newSSHDFixture(b)
	tr := relayTo(f, f.HostKey, sudoAgent(b, f)+" relay")
	relayHealth(b, tr)
	loopHealth(b, tr)
}

// sudoAgent is the agent as the box's fixed remote command starts it:
// through `sudo -n`, whose start-up every relay call pays.
func sudoAgent(b *testing.B, f *sshdFixture) string {
	if err := exec.CommandContext(b.Context(), "sudo", "-n", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("sudo -n: %v", err)
		}
		b.Skipf("sudo -n does not run here (%v): the relay benchmarks measure the production command", err)
	}
	return "sudo -n " + shellQuote(f.Agent)
}

// loopHealth runs `health --json` through tr for every benchmark round.
func loopHealth(b *testing.B, tr Transport) {
	req := request("health", "--json")
	var stdout bytes.Buffer
	for b.Loop() {
		stdout.Reset()
		code, err := tr.Run(b.Context(), req, nil, &stdout, nil)
		if err != nil || code != 0 || stdout.Len() == 0 {
			b.Fatalf("Run = %d, %v with %d bytes of stdout", code, err, stdout.Len())
		}
	}
}

// BenchmarkOpenSSHSpawnHealth measures the alternative: spawning the system
// ssh client for every call, with a full handshake each time.
func BenchmarkOpenSSHSpawnHealth(b *testing.B) {
	f := newSSHDFixture(b)
	const sshPath = "/usr/bin/ssh"
	if _, err := os.Stat(sshPath); err != nil {
		b.Skipf("%s is missing (install openssh-client)", sshPath)
	}
	knownHosts := filepath.Join(f.Dir, "known_hosts")
	if err := keys.WriteKnownHosts(knownHosts, "127.0.0.1", f.Port, f.HostKey); err != nil {
		b.Fatal(err)
	}
	args := []string{
		"-F", os.DevNull, "-i", f.KeyPath, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=" + os.DevNull,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		"-p", strconv.Itoa(f.Port), f.User + "@127.0.0.1",
		sudoAgent(b, f), "health", "--json",
	}
	env := withoutSSHAgent(os.Environ())
	run := func() []byte {
		cmd := exec.CommandContext(b.Context(), sshPath, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || len(out) == 0 {
			b.Fatalf("ssh: %v\n%s", err, stderr.Bytes())
		}
		return out
	}
	if _, err := health.Decode(run()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		run()
	}
}

// withoutSSHAgent drops SSH_AUTH_SOCK, so ssh uses only the given key.
func withoutSSHAgent(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			out = append(out, kv)
		}
	}
	return out
}
