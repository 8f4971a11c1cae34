package relay

import (
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"golang.org/x/crypto/ssh"
)

// sshdFixture is Debian's sshd on 127.0.0.1 running the real agent; see
// package sshdtest.
type sshdFixture = sshdtest.Server

func newSSHDFixture(tb testing.TB) *sshdFixture {
	tb.Helper()
	return sshdtest.New(tb, sshdtest.Options{})
}

// relayTo returns the SSH transport for the fixture, pinning pinned.
func relayTo(f *sshdFixture, pinned ssh.PublicKey, command string) *SSH {
	return &SSH{Addr: f.Addr, User: f.User, Signer: f.Signer, HostKey: pinned, Command: command, DialTimeout: waitLimit}
}

var shellQuote = sshdtest.ShellQuote

type syncBuffer = sshdtest.SyncBuffer

// dialAgent dials the fixture's real agent (pinned host key) for the test;
// the connection closes when the test ends.
func dialAgent(t *testing.T, f *sshdFixture) *Client {
	t.Helper()
	c, err := relayTo(f, f.HostKey, shellQuote(f.Agent)+" relay").Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
