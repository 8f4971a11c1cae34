package provision

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// needRoot skips outside CI when not root and fails in CI.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root, and CI runs as root")
	}
	t.Skip("needs root (it runs Debian's sshd and creates a test user)")
}

func writeTemp(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSudoersAcceptedByVisudo(t *testing.T) {
	visudo := lookPath(t, "visudo")
	dir := t.TempDir()
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"box policy", Sudoers, true},
		{"broken policy", []byte("boxadmin ALL=(hermes NOPASSWD: ALL\n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.data, 0o440)
			out, err := exec.CommandContext(t.Context(), visudo, "-cf", path).CombinedOutput()
			if (err == nil) != tt.ok {
				t.Fatalf("visudo -cf: %v\n%s", err, out)
			}
		})
	}
}

func TestSSHDDropInAcceptedByOpenSSH(t *testing.T) {
	sshd := lookPath(t, "/usr/sbin/sshd")
	needRoot(t)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dropIn := writeTemp(t, dir, "99-hermes-box.conf", SSHDDropIn, 0o644)
	conf, err := SSHDCheckConfig(dir, dropIn, "/etc/ssh/sshd_config")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), sshd, "-t", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t -f: %v\n%s", err, out)
	}
	// The effective settings for a boxadmin connection, as sshd computes them.
	out, err := exec.CommandContext(t.Context(), sshd, "-T", "-f", conf, "-C", "user=boxadmin,host=localhost,addr=127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("sshd -T: %v\n%s", err, out)
	}
	for _, want := range []string{
		"passwordauthentication no", "kbdinteractiveauthentication no", "permitrootlogin no", "pubkeyauthentication yes",
		"allowusers boxadmin", "allowagentforwarding no", "allowtcpforwarding no", "allowstreamlocalforwarding no",
		"disableforwarding yes", "gatewayports no", "x11forwarding no", "permittunnel no", "permituserenvironment no",
		"acceptenv COLORTERM", "acceptenv TERM_PROGRAM", "acceptenv TERM_PROGRAM_VERSION",
	} {
		if !bytes.Contains(out, []byte("\n"+want+"\n")) {
			t.Errorf("effective config lacks %q", want)
		}
	}
	broken := writeTemp(t, dir, "broken.conf", []byte("PermitRootLogin sometimes\n"), 0o644)
	conf, err = SSHDCheckConfig(t.TempDir(), broken, "/etc/ssh/sshd_config")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), sshd, "-t", "-f", conf).CombinedOutput(); err == nil {
		t.Fatalf("sshd -t accepted a broken drop-in:\n%s", out)
	}
}

// testUser creates a throwaway account like boxadmin (no password, bash)
// and removes it when the test ends.
func testUser(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"useradd", "userdel", "passwd"} {
		lookPath(t, tool)
	}
	name := fmt.Sprintf("hbt%d%04x", os.Getpid()%100000, time.Now().UnixNano()&0xffff)
	if out, err := exec.CommandContext(t.Context(), "useradd", "--create-home", "--shell", "/bin/bash", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
	})
	if out, err := exec.CommandContext(t.Context(), "passwd", "--delete", name).CombinedOutput(); err != nil {
		t.Fatalf("passwd --delete: %v\n%s", err, out)
	}
	return name
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// liveSSHD starts Debian's sshd on 127.0.0.1 with the box's drop-in, its
// AllowUsers pointed at user, and authorized keys for user and root.
func liveSSHD(t *testing.T, user string, clientKey ssh.PublicKey) string {
	t.Helper()
	sshd := lookPath(t, "/usr/sbin/sshd")
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hermes-box-sshd-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := bytes.Replace(SSHDDropIn, []byte("AllowUsers boxadmin"), []byte("AllowUsers "+user), 1)
	if bytes.Equal(dropIn, SSHDDropIn) {
		t.Fatal("the drop-in has no AllowUsers boxadmin line")
	}
	dropInPath := writeTemp(t, dir, "99-hermes-box.conf", dropIn, 0o644)
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	auth := ssh.MarshalAuthorizedKey(clientKey)
	for _, u := range []string{user, "root", "nobody"} {
		writeTemp(t, keys, u, auth, 0o644)
	}
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(hostKey, "")
	if err != nil {
		t.Fatal(err)
	}
	writeTemp(t, dir, "host_key", pemBytes(block), 0o600)
	port := freePort(t)
	conf := fmt.Sprintf("Include %s\nPort %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s/%%u\nStrictModes no\nUsePAM no\n",
		dropInPath, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "sshd.pid"), keys)
	confPath := writeTemp(t, dir, "sshd_config", []byte(conf), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sshd, "-D", "-e", "-f", confPath)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", logs.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sshd did not listen on %s:\n%s", addr, logs.String())
	return ""
}

func TestSSHDLiveWithTheDropIn(t *testing.T) {
	needRoot(t)
	user := testUser(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	addr := liveSSHD(t, user, signer.PublicKey())
	dial := func(u string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
		return ssh.Dial("tcp", addr, &ssh.ClientConfig{User: u, Auth: auth, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	}

	t.Run("key login as the allowed user works", func(t *testing.T) {
		c, err := dial(user, ssh.PublicKeys(signer))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Output("id -un")
		if err != nil || strings.TrimSpace(string(out)) != user {
			t.Fatalf("id -un: %q, %v", out, err)
		}
	})
	refused := []struct {
		name string
		user string
		auth []ssh.AuthMethod
	}{
		{"empty password", user, []ssh.AuthMethod{ssh.Password("")}},
		{"password", user, []ssh.AuthMethod{ssh.Password("secret")}},
		{"keyboard-interactive", user, []ssh.AuthMethod{ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return []string{""}, nil })}},
		{"root with a key", "root", []ssh.AuthMethod{ssh.PublicKeys(signer)}},
		{"another user with a key", "nobody", []ssh.AuthMethod{ssh.PublicKeys(signer)}},
	}
	for _, tt := range refused {
		t.Run(tt.name+" refused", func(t *testing.T) {
			c, err := dial(tt.user, tt.auth...)
			if err == nil {
				c.Close()
				t.Fatal("login succeeded")
			}
			if !strings.Contains(err.Error(), "unable to authenticate") {
				t.Fatalf("got %v, want an authentication refusal", err)
			}
		})
	}
	t.Run("forwarding refused", func(t *testing.T) {
		c, err := dial(user, ssh.PublicKeys(signer))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// -L: a direct-tcpip channel to a port that is listening.
		if conn, err := c.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Error("-L forwarding was allowed")
		} else if !strings.Contains(err.Error(), "prohibited") {
			t.Errorf("-L refused with %v, want administratively prohibited", err)
		}
		// -R: a remote listener.
		if l, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
			l.Close()
			t.Error("-R forwarding was allowed")
		}
		// Agent forwarding.
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if ok, err := s.SendRequest("auth-agent-req@openssh.com", true, nil); err == nil && ok {
			t.Error("agent forwarding was allowed")
		}
	})
}

func pemBytes(b *pem.Block) []byte { return pem.EncodeToMemory(b) }
