package sshdtest

import (
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSessionShellIsNotTopLevel checks that a session's login shell starts
// one level down, which is what keeps bash from sourcing the developer's
// ~/.bashrc for every command (see Config). Without the SetEnv line a bash
// login shell reports level 1 and any other shell reports none.
func TestSessionShellIsNotTopLevel(t *testing.T) {
	s := New(t, Options{NoAgent: true})
	conn, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey),
		Timeout:         WaitLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output(`echo "${SHLVL-unset}:${BASH_VERSION-}"`)
	if err != nil {
		t.Fatalf("running the probe: %v\nsshd log:\n%s", err, s.Log)
	}
	level, bashVersion, _ := strings.Cut(strings.TrimSpace(string(out)), ":")
	want := strings.TrimPrefix(SessionShellLevel, "SHLVL=")
	if bashVersion != "" {
		want = "2" // bash counts itself
	}
	if level != want {
		t.Errorf("the session's shell level is %q (bash %q), want %q", level, bashVersion, want)
	}
}

// TestConfigFoldsSetEnv checks that variables of extra SetEnv lines land on
// the one SetEnv line (sshd ignores every SetEnv line after the first) and
// that other extra lines are appended as given.
func TestConfigFoldsSetEnv(t *testing.T) {
	config := Config(2222, "/k", "/a", "u", "LogLevel ERROR", "SetEnv A=1", "SetEnv B=2 C=3")
	var setEnv []string
	for _, line := range strings.Split(config, "\n") {
		if strings.HasPrefix(line, "SetEnv ") {
			setEnv = append(setEnv, line)
		}
	}
	want := "SetEnv " + SessionShellLevel + " A=1 B=2 C=3"
	if len(setEnv) != 1 || setEnv[0] != want {
		t.Errorf("SetEnv lines = %q, want [%q]", setEnv, want)
	}
	if !strings.HasSuffix(config, "\nLogLevel ERROR\n") {
		t.Errorf("the extra line is not last:\n%s", config)
	}
}
