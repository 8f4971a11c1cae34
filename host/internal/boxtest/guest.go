//go:build !hbxrelease

package boxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// GuestProgram is the name under which this test binary stands in for the
// box's programs when the real agent's boot supervises them in a machine of
// the fake smolvm (a symlink on PATH).
const GuestProgram = "hbx-test-guest"

// GuestRootEnv is set by the stand-in sshd in every session: the machine's
// root, so that the relay command runs that machine's agent.
const GuestRootEnv = "HBX_GUEST_ROOT"

// GuestRelayCommand is the remote command of the SSH relay in these tests.
const GuestRelayCommand = `"$` + GuestRootEnv + `"` + boxlayout.AgentPath + ` --root "$` + GuestRootEnv + `" relay`

// guestMain runs a stand-in program: `sshd ADDR` (Debian's sshd for the
// machine whose root is the working directory, on ADDR) or `hermes` (prints
// three log lines, then waits for SIGTERM).
func guestMain(args []string) int {
	if len(args) == 2 && args[0] == "sshd" {
		return guestSSHD(args[1])
	}
	if len(args) == 1 && args[0] == "hermes" {
		// What the gateway got of the mapped secret, as a digest: the
		// value itself must not reach a file the tests could leak.
		sum := sha256.Sum256([]byte(os.Getenv("OPENAI_API_KEY")))
		if err := os.WriteFile("../../run/hbx-test-gateway-secret", []byte(hex.EncodeToString(sum[:])), 0o600); err != nil {
			return fail(err)
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		for i := 1; i <= 3; i++ {
			fmt.Printf("hermes line %d\n", i)
		}
		<-sig
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s: unknown program %q\n", GuestProgram, args)
	return 2
}

// guestSSHD execs sshd with a config for the machine root in the working
// directory: its host key, boxadmin's authorized keys, the current user.
func guestSSHD(addr string) int {
	root, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fail(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fail(err)
	}
	u, err := user.Current()
	if err != nil {
		return fail(err)
	}
	dir := filepath.Join(root, "run", "hbx-test-sshd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	product, err := productSSHDConfig(root)
	if err != nil {
		return fail(err)
	}
	users, extra, env := u.Username, []string{"LogLevel ERROR", "SetEnv " + GuestRootEnv + "=" + root}, os.Environ()
	if _, err := os.Stat(releaseLoginMarker(root)); err == nil {
		if users, extra, env, err = releaseLogin(dir, users, extra, env); err != nil {
			return fail(err)
		}
	}
	config := product + sshdtest.ConfigOn(host, port, filepath.Join(root, "etc/ssh/ssh_host_ed25519_key"),
		filepath.Join(root, "home/boxadmin/.ssh/authorized_keys"), users, extra...)
	path := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return fail(err)
	}
	return fail(syscall.Exec(sshdtest.SSHDPath, []string{sshdtest.SSHDPath, "-D", "-e", "-f", path}, env))
}

// releaseLoginMarker is the file in the fake smolvm's state directory
// (every machine's root is <state>/machines/NAME/root) that makes each
// machine's sshd take the release binary's login: boxadmin, and whatever
// remote command it asks for.
func releaseLoginMarker(root string) string {
	return filepath.Join(root, "..", "..", "..", "release-login")
}

// releaseLogin is the sshd of a box that a release hermes-box (no test
// hooks: it logs in as boxadmin and asks for boxlayout.RelayCommand)
// reaches: Debian's sshd, run as this user, sees a boxadmin with this
// user's ids through nss_wrapper (Debian's libnss-wrapper), and forces the
// test's relay command, as the box's sudo and agent path would run it.
func releaseLogin(dir, users string, extra, env []string) (string, []string, []string, error) {
	lib, _ := filepath.Glob("/usr/lib/*/libnss_wrapper.so")
	if len(lib) == 0 {
		return "", nil, nil, errors.New("libnss_wrapper.so is missing (install libnss-wrapper)")
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return "", nil, nil, err
	}
	u, err := user.Current()
	if err != nil {
		return "", nil, nil, err
	}
	entry := fmt.Sprintf("%s:x:%s:%s:box admin:%s:/bin/sh\n", boxlayout.AdminUser, u.Uid, u.Gid, u.HomeDir)
	path := filepath.Join(dir, "passwd")
	if err := os.WriteFile(path, append(passwd, entry...), 0o600); err != nil {
		return "", nil, nil, err
	}
	env = append(env, "LD_PRELOAD="+lib[0], "NSS_WRAPPER_PASSWD="+path, "NSS_WRAPPER_GROUP=/etc/group")
	return users + " " + boxlayout.AdminUser, append(extra, "ForceCommand "+GuestRelayCommand), env, nil
}

// ubuntuSSHDConfig is what Ubuntu 24.04's /etc/ssh/sshd_config sets
// after it includes sshd_config.d: the box's sshd runs with PAM.
const ubuntuSSHDConfig = `KbdInteractiveAuthentication no
UsePAM yes
X11Forwarding yes
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
`

// productSSHDConfig is the configuration the box's sshd reads before the
// test's own lines when the machine holds the agent's drop-in (a benchmark
// seeds it, as provision writes it): the drop-in, then Ubuntu's main
// configuration. sshd keeps the first value of an option, so the test's
// lines only add what neither sets (port, host key, keys file, the test's
// user in place of boxadmin). Without the drop-in it is empty.
func productSSHDConfig(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, DropInPath))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		// The test logs in as the current user, not boxadmin.
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "AllowUsers" || f[0] == "PermitRootLogin") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String() + ubuntuSSHDConfig, nil
}

// DropInPath is where provision writes the box's sshd configuration.
const DropInPath = "etc/ssh/sshd_config.d/99-hermes-box.conf"

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", GuestProgram, err)
	return 1
}

// writeBootTable writes the program table the fake smolvm hands to the
// real agent's boot: the stand-in sshd on the machine's guest address for
// port 22 and the stand-in Hermes gateway, with the box's checks.
func writeBootTable(t testing.TB, path string) {
	t.Helper()
	zero := 0.0
	wait := 5.0
	logSpec := func(name string) map[string]any {
		return map[string]any{"path": boxlayout.LogDir + "/" + name, "maxbytes": 1 << 20, "backups": 1}
	}
	table := map[string]any{
		"programs": []map[string]any{{
			"name": "sshd", "command": []string{GuestProgram, "sshd", "{guest:22}"}, "directory": "/",
			"priority": 10, "autostart": true, "autorestart": "unexpected", "startsecs": zero, "stopwaitsecs": wait,
			"log": logSpec("sshd.log"),
		}, {
			"name": "hermes", "command": []string{GuestProgram, "hermes"}, "directory": boxlayout.WorkDir,
			"secretsfile": "/run/hermes-box-secrets/root/env.json",
			"priority":    40, "autostart": true, "autorestart": "unexpected", "startsecs": zero, "stopwaitsecs": wait,
			"log": logSpec("hermes-gateway.log"),
		}},
		"checks": []map[string]any{
			{"code": "sshd-listening", "tcp": "{guest:22}"},
			{"code": "hermes-gateway", "service": "hermes"},
		},
	}
	b, err := json.MarshalIndent(table, "", "  ")
	Must(t, err)
	Must(t, os.WriteFile(path, b, 0o600))
}
