package netprobe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/cli"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// helperEnv makes the test binary a helper: "listen PORT" accepts TCP
// connections on every address of its network namespace; "probe" is the
// agent's `netprobe` verb.
const helperEnv = "NETPROBE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		os.Exit(listen(os.Args[1]))
	case "probe":
		os.Exit(cli.Run(context.Background(), []string{"--root", "/", "netprobe"}, cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Exit(2)
}

func listen(port string) int {
	l, err := net.Listen("tcp", "[::]:"+port)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		_ = c.Close()
	}
}

// The test's two namespaces: "out" holds the listeners (every address a
// probe may reach), "in" is the guest whose output the rules filter.
const (
	port      = "18443"
	outGW     = "10.231.0.1"  // the guest's default gateway
	allowedIP = "10.231.0.10" // allowed.test
	unlisted  = "10.231.0.11" // unlisted.test
	aliasIP   = "10.231.0.12" // stands for 100.96.0.1 / host.smolvm.internal
	directIP  = "10.231.0.13"
	outV6     = "fd31::1"
)

type netns struct{ in, out string }

func setup(t *testing.T) netns {
	t.Helper()
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil || os.Getuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the network-namespace probe tests need root, ip and nft (%v)", err)
			}
			t.Skipf("needs root, ip and nft: %v", err)
		}
	}
	id := strconv.Itoa(os.Getpid() % 100000)
	ns := netns{in: "hbxi-" + id, out: "hbxo-" + id}
	vin, vout := "hbxi"+id, "hbxo"+id
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", ns.in).Run()
		_ = exec.Command("ip", "netns", "del", ns.out).Run()
	})
	cmds := [][]string{
		{"ip", "netns", "add", ns.in}, {"ip", "netns", "add", ns.out},
		{"ip", "link", "add", vout, "type", "veth", "peer", "name", vin},
		{"ip", "link", "set", vout, "netns", ns.out}, {"ip", "link", "set", vin, "netns", ns.in},
	}
	for _, a := range []string{outGW, allowedIP, unlisted, aliasIP, directIP} {
		cmds = append(cmds, []string{"ip", "-n", ns.out, "addr", "add", a + "/24", "dev", vout})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", ns.out, "-6", "addr", "add", outV6 + "/64", "dev", vout, "nodad"},
		[]string{"ip", "-n", ns.out, "link", "set", vout, "up"}, []string{"ip", "-n", ns.out, "link", "set", "lo", "up"},
		[]string{"ip", "-n", ns.in, "addr", "add", "10.231.0.2/24", "dev", vin},
		[]string{"ip", "-n", ns.in, "-6", "addr", "add", "fd31::2/64", "dev", vin, "nodad"},
		[]string{"ip", "-n", ns.in, "link", "set", vin, "up"}, []string{"ip", "-n", ns.in, "link", "set", "lo", "up"},
		[]string{"ip", "-n", ns.in, "route", "add", "default", "via", outGW},
		[]string{"ip", "-n", ns.in, "-6", "route", "add", "default", "via", outV6},
	)
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	startListener(t, ns.out)
	return ns
}

func startListener(t *testing.T, ns string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe, port)
	cmd.Env = append(os.Environ(), helperEnv+"=listen")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("listener: %q %v", line, err)
	}
}

// rules writes the guest namespace's output filter: loopback, neighbour
// discovery and the extra accepts pass, every other TCP connection is
// rejected at once.
func rules(t *testing.T, ns netns, accepts ...string) {
	t.Helper()
	ruleset := "flush ruleset\ntable inet hbx {\n chain out {\n  type filter hook output priority 0; policy accept;\n" +
		"  oif \"lo\" accept\n  meta l4proto ipv6-icmp accept\n"
	for _, a := range accepts {
		ruleset += "  " + a + " accept\n"
	}
	ruleset += "  meta l4proto tcp reject with tcp reset\n }\n}\n"
	cmd := exec.Command("ip", "netns", "exec", ns.in, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s\n%s", err, out, ruleset)
	}
}

func plan(mode string) netproof.Plan {
	p := netproof.Plan{Mode: mode, DirectIP: directIP + ":" + port, UnlistedHost: "unlisted.test:" + port,
		IPv6: "[" + outV6 + "]:" + port, HostLoopback: []string{aliasIP + ":" + port, "alias.test:" + port},
		GatewayPorts: []int{18443}, TimeoutMillis: 2000,
		Resolve: map[string]string{"allowed.test": allowedIP, "unlisted.test": unlisted, "alias.test": aliasIP}}
	if mode == netproof.ModeStrict {
		p.Allowed, p.AllowedPort = []string{"allowed.test"}, 18443
	}
	return p
}

// probe runs the agent's netprobe verb in the guest namespace.
func probe(t *testing.T, ns netns, p netproof.Plan) (netproof.Proof, int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(p)
	cmd := exec.Command("ip", "netns", "exec", ns.in, exe)
	cmd.Env = append(os.Environ(), helperEnv+"=probe")
	cmd.Stdin = bytes.NewReader(doc)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var proof netproof.Proof
	if err := json.Unmarshal(stdout.Bytes(), &proof); err != nil {
		t.Fatalf("proof %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	return proof, code, stderr.String()
}

// TestProbesInNetworkNamespaces proves strict and none under rules that
// enforce them, then opens one probe class at a time: each leak is caught
// and named; a blocked listed host is caught too.
func TestProbesInNetworkNamespaces(t *testing.T) {
	ns := setup(t)
	allowed := "ip daddr " + allowedIP + " tcp dport " + port
	cases := []struct {
		name    string
		mode    string
		accepts []string
		want    string // "" = the proof holds
	}{
		{"strict enforced", netproof.ModeStrict, []string{allowed}, ""},
		{"none enforced", netproof.ModeNone, nil, ""},
		{"strict leaks direct IP", netproof.ModeStrict, []string{allowed, "ip daddr " + directIP}, "direct-ip probe " + directIP + ":" + port + " was reachable"},
		{"strict leaks unlisted host", netproof.ModeStrict, []string{allowed, "ip daddr " + unlisted}, "unlisted-host probe unlisted.test:" + port + " was reachable"},
		{"strict leaks IPv6", netproof.ModeStrict, []string{allowed, "ip6 daddr " + outV6}, "ipv6 probe [" + outV6 + "]:" + port + " was reachable"},
		{"none leaks host loopback", netproof.ModeNone, []string{"ip daddr " + aliasIP}, "host-loopback probe alias.test:" + port + " was reachable"},
		{"none leaks gateway", netproof.ModeNone, []string{"ip daddr " + outGW}, "gateway probe " + outGW + ":" + port + " was reachable"},
		{"none leaks direct IP", netproof.ModeNone, []string{"ip daddr " + directIP}, "direct-ip probe"},
		{"strict blocks the listed host", netproof.ModeStrict, nil, "listed-host probe allowed.test:" + port + " was blocked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules(t, ns, c.accepts...)
			start := time.Now()
			proof, code, stderr := probe(t, ns, plan(c.mode))
			verdict := proof.Verdict()
			if c.want == "" {
				if verdict != nil || code != 0 {
					t.Fatalf("exit %d, verdict %v\n%s", code, verdict, stderr)
				}
				return
			}
			if verdict == nil || !strings.Contains(verdict.Error(), c.want) || code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, verdict %v, stderr %s; want %q", code, verdict, stderr, c.want)
			}
			t.Logf("%s in %v", verdict, time.Since(start).Round(time.Millisecond))
		})
	}
}
