package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStandInLifecycle drives the QEMU-backed smolvm stand-in through its
// CLI the way hermes-box init does: a builder from the image, exec and cp,
// a published port, pack, a runtime from the pack whose entrypoint runs,
// stop and delete, with nothing left behind.
func TestStandInLifecycle(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	suffix := randHex(t, 3)
	builder, runtime := "e2e-b-"+suffix, "e2e-r-"+suffix
	secret := "s3cret-" + randHex(t, 8)
	e.environ = append(e.environ, "E2E_HOST_SECRET="+secret)
	webPort, sshPort := freePort(t), freePort(t)

	phase(t, "version and grammar", func() { checkGrammar(t, e) })
	phase(t, "create builder", func() {
		e.Smolvm("machine", "create", "--name", builder, "--image", "ubuntu:24.04", "--cpus", "2", "--mem", "1024",
			"--net", "--net-backend", "virtio-net", "-p", fmt.Sprintf("%d:8080", webPort))
		e.Smolvm("machine", "update", "--name", builder, "--net")
		st := status(t, e, builder)
		mustf(t, st["state"] == "created" && st["network"] == true && st["ports"] == 1.0, "status after create: %v", st)
	})
	phase(t, "start builder", func() { e.Smolvm("machine", "start", "--name", builder) })
	phase(t, "exec", func() { checkExec(t, e, builder) })
	phase(t, "cp in and out", func() { checkCopy(t, e, builder) })
	phase(t, "published port", func() { checkPort(t, e, builder, webPort) })
	phase(t, "stop builder", func() { e.Smolvm("machine", "stop", "--name", builder) })
	artifact := filepath.Join(e.Scratch, "e2e-base")
	phase(t, "pack create", func() {
		e.Smolvm("pack", "create", "--from-vm", builder, "--smolfile", filepath.Join(e.Root, "tests/e2e/testdata/Smolfile"), "--output", artifact)
		for _, p := range []string{artifact, artifact + ".smolmachine"} {
			_, err := os.Stat(p)
			mustf(t, err == nil, "pack output %s: %v", p, err)
		}
	})
	phase(t, "create from pack", func() {
		e.Smolvm("machine", "create", "--name", runtime, "--from", artifact+".smolmachine", "--cpus", "2", "--mem", "1024",
			"-p", fmt.Sprintf("%d:22", sshPort), "-e", "E2E_GREETING=hello", "--secret-env", "E2E_SECRET=E2E_HOST_SECRET")
		dir := strings.TrimSpace(e.Smolvm("machine", "data-dir", "--name", runtime))
		_, err := os.Stat(filepath.Join(dir, "pack", ".smolvm-extracted"))
		mustf(t, err == nil, "extraction marker: %v", err)
		st := status(t, e, runtime)
		mustf(t, fmt.Sprint(st["entrypoint"]) == "[/usr/local/sbin/e2e-guest]" && fmt.Sprint(st["cmd"]) == "[entrypoint]", "entrypoint from the Smolfile: %v", st)
	})
	phase(t, "start runtime", func() { e.Smolvm("machine", "start", "--name", runtime) })
	phase(t, "entrypoint runs", func() { checkEntrypoint(t, e, runtime, secret, sshPort) })
	phase(t, "stop runtime", func() {
		e.Smolvm("machine", "stop", "--name", runtime)
		mustf(t, status(t, e, runtime)["state"] == "stopped", "runtime not stopped")
	})
	phase(t, "delete --force", func() {
		e.Smolvm("machine", "delete", "--name", builder, "--force")
		e.Smolvm("machine", "delete", "--name", runtime, "--force")
		mustf(t, strings.TrimSpace(e.Smolvm("machine", "ls", "--json")) == "[]", "ls after delete is not []")
		mustf(t, len(e.QEMUProcesses()) == 0, "QEMU processes left: %v", e.QEMUProcesses())
		ents, err := os.ReadDir(e.State)
		mustf(t, err == nil && len(ents) == 0, "state dir not empty: %v %v", ents, err)
	})
	t.Logf("phase %-28s %6.1f s", "total (after build)", time.Since(start).Seconds())
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func status(t *testing.T, e *Env, name string) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(e.Smolvm("machine", "status", "--name", name, "--json")), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	return st
}

// checkGrammar: the version, and refusals in smolvm's shapes.
func checkGrammar(t *testing.T, e *Env) {
	mustf(t, e.Smolvm("--version") == "smolvm 1.0.4\n", "--version")
	mustf(t, strings.TrimSpace(e.Smolvm("machine", "ls", "--json")) == "[]", "ls --json on an empty state dir")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"machine", "exec", "-n", "x", "--", "true"}, 2, "error: unexpected argument '-n' found"},
		{[]string{"machine", "create", "--name", "x", "--bogus"}, 2, "error: unexpected argument '--bogus' found"},
		{[]string{"machine", "status", "--name", "nope", "--json"}, 1, "Error: config operation failed: machine status: machine 'nope' not found"},
		{[]string{"machine", "create", "--name", "x", "--net-backend", "tsi", "-p", "1:2"}, 1, "published ports require the virtio-net backend"},
		{[]string{"machine", "delete", "--force"}, 2, "--name <NAME>"},
	}
	for _, c := range cases {
		r := e.Run(nil, "smolvm", c.args...)
		mustf(t, r.Code == c.code && strings.Contains(r.Stderr, c.want), "smolvm %v: exit %d, stderr %q; want exit %d and %q", c.args, r.Code, r.Stderr, c.code, c.want)
	}
}

func checkExec(t *testing.T, e *Env, vm string) {
	out := e.Smolvm("machine", "exec", "--name", vm, "--", "uname", "-a")
	mustf(t, strings.HasPrefix(out, "Linux "+vm+" "), "uname -a: %q", out)
	t.Logf("guest: %s", strings.TrimSpace(out))
	r := e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--", "false")
	mustf(t, r.Code == 1, "exec false: exit %d", r.Code)
	r = e.Run([]byte("from the host\n"), "smolvm", "machine", "exec", "--stream", "--name", vm, "--", "cat")
	mustf(t, r.Code == 0 && r.Stdout == "from the host\n", "exec with stdin: %+v", r)
	r = e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "-e", "E2E_X=42", "--", "printenv", "E2E_X")
	mustf(t, r.Code == 0 && r.Stdout == "42\n", "exec -e: %+v", r)
	r = e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--timeout", "1s", "--", "sleep", "30")
	mustf(t, r.Code == 124, "exec --timeout: exit %d", r.Code)
}

func checkCopy(t *testing.T, e *Env, vm string) {
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	in := filepath.Join(e.Scratch, "in.bin")
	if err := os.WriteFile(in, data, 0o640); err != nil {
		t.Fatal(err)
	}
	e.Smolvm("machine", "cp", in, vm+":/root/in.bin")
	sum := sha256.Sum256(data)
	out := e.Smolvm("machine", "exec", "--name", vm, "--", "sha256sum", "/root/in.bin")
	mustf(t, strings.HasPrefix(out, hex.EncodeToString(sum[:])), "guest sha256: %q", out)
	back := filepath.Join(e.Scratch, "back.bin")
	e.Smolvm("machine", "cp", vm+":/root/in.bin", back)
	got, err := os.ReadFile(back)
	mustf(t, err == nil && bytes.Equal(got, data), "copied back: %v (%d bytes)", err, len(got))
	fi, _ := os.Stat(back)
	mustf(t, fi.Mode().Perm() == 0o640, "mode round trip: %v", fi.Mode())
	e.Smolvm("machine", "cp", filepath.Join(e.Root, "tests/e2e/testdata/e2e-guest.sh"), vm+":/usr/local/sbin/e2e-guest")
	r := e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--", "e2e-guest", "exit", "42")
	mustf(t, r.Code == 42, "copied helper: exit %d %s", r.Code, r.Stderr)
	e.Smolvm("machine", "cp", filepath.Join(e.Bin, "hermes-box-agent"), vm+":/usr/local/sbin/hermes-box-agent")
	r = e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--", "hermes-box-agent", "version")
	mustf(t, r.Code == 0, "the real agent in the VM: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
}

// checkPort serves HTTP in the guest through a streaming exec and checks
// the published port answers on 127.0.0.1 only; killing the exec client
// must stop the guest server (the guest init's session watchdog).
func checkPort(t *testing.T, e *Env, vm string, port int) {
	ctx, cancel := context.WithCancel(t.Context())
	server := e.Command(ctx, "smolvm", "machine", "exec", "--stream", "--name", vm, "--", "e2e-guest", "serve", "8080")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = server.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	client := &http.Client{Timeout: 3 * time.Second}
	eventually(t, 60*time.Second, 300*time.Millisecond, "guest HTTP server via 127.0.0.1", func() error { return httpOK(client, url) })
	mustf(t, listensOnLoopbackOnly(t, port), "published port %d is not bound to 127.0.0.1 only", port)
	for _, ip := range otherAddrs(t) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("published port %d reachable on %s", port, ip)
		}
	}
	cancel()
	_ = server.Wait()
	eventually(t, 30*time.Second, 500*time.Millisecond, "guest server gone after its exec client died", func() error {
		if httpOK(client, url) == nil {
			return fmt.Errorf("still serving")
		}
		return nil
	})
}

func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// listensOnLoopbackOnly reads /proc/net/tcp{,6}: every listener on port
// must be 127.0.0.1.
func listensOnLoopbackOnly(t *testing.T, port int) bool {
	hexPort := fmt.Sprintf(":%04X", port)
	found := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], hexPort) {
				continue
			}
			if fields[1] != "0100007F"+hexPort {
				t.Logf("listener %s in %s", fields[1], f)
				return false
			}
			found = true
		}
	}
	return found
}

// otherAddrs lists this host's addresses other than 127.0.0.1.
func otherAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"::1"}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// checkEntrypoint: the Smolfile entrypoint ran with the -e values and
// without the --secret-env ones (smolvm drops them on create --from), the
// builder's files survived the pack, and sshd answers on the published port.
func checkEntrypoint(t *testing.T, e *Env, vm, secret string, sshPort int) {
	var marker string
	eventually(t, 60*time.Second, 500*time.Millisecond, "entrypoint marker", func() error {
		r := e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--", "cat", "/run/e2e-entrypoint")
		marker = r.Stdout
		if r.Code != 0 {
			return fmt.Errorf("exit %d: %s", r.Code, r.Stderr)
		}
		return nil
	})
	dropped := sha256.Sum256(nil)
	mustf(t, secret != "", "no secret to drop")
	want := "greeting=hello\nsecret_sha256=" + hex.EncodeToString(dropped[:]) + "\n"
	mustf(t, marker == want, "entrypoint marker %q, want %q", marker, want)
	r := e.Run(nil, "smolvm", "machine", "exec", "--name", vm, "--", "test", "-s", "/root/in.bin")
	mustf(t, r.Code == 0, "file from the builder missing in the runtime")
	eventually(t, 60*time.Second, 500*time.Millisecond, "sshd banner on 127.0.0.1", func() error {
		return sshBanner(fmt.Sprintf("127.0.0.1:%d", sshPort))
	})
}

// sshBanner reads the server's identification line (slirp accepts before
// the guest listens, so a connection alone proves nothing).
func sshBanner(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("banner %q", line)
	}
	return nil
}
