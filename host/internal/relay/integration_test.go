package relay

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// TestOpenSSHRelay runs the real agent through Debian's OpenSSH sshd: first
// with the pinned host key, then after sshd came back on the same port with
// another host key, which the relay must refuse before sending anything.
func TestOpenSSHRelay(t *testing.T) {
	f := newSSHDFixture(t)
	stateDir := filepath.Join(f.Dir, "state")
	if err := keys.SaveHostKey(stateDir, "box", f.HostKey); err != nil {
		t.Fatal(err)
	}
	pinned, err := keys.LoadHostKey(stateDir, "box")
	if err != nil {
		t.Fatal(err)
	}
	wrapper, err := filepath.Abs(filepath.Join("testdata", "marker-wrapper.sh"))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(f.Dir, "remote-command-ran")
	command := strings.Join([]string{"/bin/sh", shellQuote(wrapper), shellQuote(marker), shellQuote(f.Agent), "relay"}, " ")
	tr := relayTo(f, pinned, command)

	t.Run("health over the pinned connection", func(t *testing.T) {
		report := relayHealth(t, tr)
		if report.Agent.Version == "" {
			t.Errorf("report has no agent version: %+v", report)
		}
		// The positive control for the next case: running the command
		// creates the marker.
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the remote command did not create its marker: %v", err)
		}
		if !strings.Contains(f.Log.String(), "Starting session: command") {
			t.Errorf("sshd did not log the session:\n%s", f.Log)
		}
	})

	t.Run("host key changed on the same port", func(t *testing.T) {
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		f.Stop(t)
		f.Start(t, "second")
		if bytes.Equal(f.HostKey.Marshal(), pinned.Marshal()) {
			t.Fatal("the restarted sshd has the same host key")
		}
		logBefore := len(f.Log.String())
		code, err := tr.Run(t.Context(), request("health", "--json"), strings.NewReader("must not be sent"), nil, nil)
		if !errors.Is(err, ErrHostKeyMismatch) {
			t.Fatalf("Run = %d, %v; want an error wrapping ErrHostKeyMismatch", code, err)
		}
		if !strings.HasPrefix(err.Error(), "dialing "+f.Addr+": ") || !strings.Contains(err.Error(), keys.Fingerprint(f.HostKey)) {
			t.Errorf("error %q should name the address and the offered key's fingerprint", err)
		}
		checkNothingRan(t, f, marker, logBefore)
	})
}

// checkNothingRan proves a refused call never reached the remote command:
// no marker, and sshd logged neither a login nor a session.
func checkNothingRan(t *testing.T, f *sshdFixture, marker string, logFrom int) {
	t.Helper()
	// sshd logs the client's disconnect before authentication ("[preauth]");
	// wait for it, so the checks below do not pass merely because sshd has
	// not written anything yet.
	waitFor(t, "sshd to log the refused connection", func() bool {
		return strings.Contains(f.Log.String()[logFrom:], "[preauth]")
	})
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the remote command ran (marker stat: %v)", err)
	}
	log := f.Log.String()[logFrom:]
	for _, bad := range []string{"Accepted publickey", "Starting session"} {
		if strings.Contains(log, bad) {
			t.Errorf("sshd log shows %q after the refusal:\n%s", bad, log)
		}
	}
}

// relayHealth runs `health --json` through tr and decodes the report.
func relayHealth(t testing.TB, tr Transport) *health.Report {
	t.Helper()
	var stdout bytes.Buffer
	var events []string
	code, err := tr.Run(t.Context(), request("health", "--json"), nil, &stdout, func(ev protocol.Event) {
		events = append(events, summary(ev))
	})
	if err != nil {
		t.Fatalf("relaying health: %v", err)
	}
	if code != 0 {
		t.Fatalf("health exited %d; events %q", code, events)
	}
	report, err := health.Decode(stdout.Bytes())
	if err != nil {
		t.Fatalf("%v\nstdout: %s\nevents: %q", err, stdout.Bytes(), events)
	}
	return report
}

// TestStoppedCallEndsOnlyItsSession: a call whose stdout fails ends its own
// session; the connection and the next call on it go on.
func TestStoppedCallEndsOnlyItsSession(t *testing.T) {
	f := newSSHDFixture(t)
	c := dialAgent(t, f)
	if _, err := c.Run(t.Context(), request("health", "--json"), nil, failingWriter{}, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("the stopped call: %v, want the writer's error", err)
	}
	var stdout bytes.Buffer
	code, err := c.Run(t.Context(), request("health", "--json"), nil, &stdout, nil)
	if err != nil || code != 0 || stdout.Len() == 0 {
		t.Fatalf("the next call on the same connection: %d, %v with %d bytes", code, err, stdout.Len())
	}
}
