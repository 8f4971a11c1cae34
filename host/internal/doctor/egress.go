package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// The egress row's targets. hostAlias is smolvm's virtio-net gateway,
// which from 1.7.2 relays a guest's connections to the host's loopback
// (host.smolvm.internal names it from 1.8.3); metadataAddr is the cloud
// metadata service. Under SMOLVM_EGRESS_FLOOR=strict smolvm drops a guest's
// SYN to either, and to the host's LAN, before any socket exists.
const (
	hostAlias    = "100.96.0.1"
	metadataAddr = "169.254.169.254"
	probePort    = 80
	// probeTimeout bounds one probe: a dropped SYN is retried by the
	// guest's kernel far longer.
	probeTimeout = 3 * time.Second
)

// Gateways finds the host's default IPv4 gateway: the LAN router a guest
// must not reach under the strict floor.
type Gateways interface {
	DefaultGateway(ctx context.Context) (netip.Addr, error)
}

// errNoDefaultRoute: the host has no default IPv4 route, so it has no LAN
// gateway to probe.
var errNoDefaultRoute = errors.New("no default IPv4 route")

// HostGateways reads the default gateway of this host: /proc/net/route on
// Linux, `route -n get default` on macOS.
type HostGateways struct{}

// DefaultGateway returns the host's default IPv4 gateway.
func (HostGateways) DefaultGateway(ctx context.Context) (netip.Addr, error) {
	switch runtime.GOOS {
	case "linux":
		b, err := os.ReadFile("/proc/net/route")
		if err != nil {
			return netip.Addr{}, fmt.Errorf("reading the default gateway: %w", err)
		}
		return parseProcRoute(b)
	case "darwin":
		out, err := exec.CommandContext(ctx, "route", "-n", "get", "default").Output()
		if err != nil {
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				return netip.Addr{}, errNoDefaultRoute // "not in table"
			}
			return netip.Addr{}, fmt.Errorf("route -n get default: %w", err)
		}
		return parseRouteGet(out)
	}
	return netip.Addr{}, fmt.Errorf("reading the default gateway on %s: not supported", runtime.GOOS)
}

// FixedGateway is a gateway named in advance: tests name a documentation
// address so that no probe ever aims at the real LAN.
type FixedGateway netip.Addr

// DefaultGateway returns the address.
func (g FixedGateway) DefaultGateway(context.Context) (netip.Addr, error) { return netip.Addr(g), nil }

// parseProcRoute finds the default route's gateway in Linux's
// /proc/net/route: whitespace-separated columns after a header line, the
// destination and gateway as little-endian hex, flags in hex with RTF_UP
// (1) and RTF_GATEWAY (2).
func parseProcRoute(b []byte) (netip.Addr, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) < 4 || f[1] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&3 != 3 {
			continue
		}
		gw, err := hex.DecodeString(f[2])
		if err != nil || len(gw) != 4 {
			return netip.Addr{}, fmt.Errorf("/proc/net/route line %d: gateway %q is not 8 hex digits", n, f[2])
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(gw))
		return netip.AddrFrom4(a), nil
	}
	return netip.Addr{}, errNoDefaultRoute
}

// parseRouteGet finds "gateway: ADDR" in the output of macOS's `route -n
// get default`.
func parseRouteGet(b []byte) (netip.Addr, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || k != "gateway" {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("route -n get default: gateway %q is not an IPv4 address", strings.TrimSpace(v))
		}
		return a, nil
	}
	return netip.Addr{}, errNoDefaultRoute
}

// egressFloor probes, from inside the throwaway machine (started with the
// strict floor, or 1.0.4's default full floor), the host's loopback
// through smolvm's host alias (a port the doctor listens on), the host's
// LAN gateway and the cloud metadata address. A connect that completes or
// is refused reached the target; one that fails otherwise or times out was
// stopped by the floor.
func (s *state) egressFloor(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening on the host's loopback: %w", err)
	}
	defer ln.Close()
	targets := []probeTarget{{"host loopback through the host alias", hostAlias, ln.Addr().(*net.TCPAddr).Port}}
	gw, err := s.d.Gateways.DefaultGateway(ctx)
	switch {
	case err == nil:
		targets = append(targets, probeTarget{"LAN gateway", gw.String(), probePort})
	case !errors.Is(err, errNoDefaultRoute):
		return "", err
	}
	targets = append(targets, probeTarget{"cloud metadata", metadataAddr, probePort})
	var blocked, reached []string
	for _, t := range targets {
		ok, how, err := s.probe(ctx, t)
		if err != nil {
			return "", err
		}
		line := fmt.Sprintf("%s %s:%d %s", t.what, t.addr, t.port, how)
		if ok {
			reached = append(reached, line)
		} else {
			blocked = append(blocked, line)
		}
	}
	if len(reached) > 0 {
		return "", fmt.Errorf("under %s=%s the guest reached %s", smolvm.EgressFloorEnv, smolvm.EgressFloorStrict, strings.Join(reached, "; "))
	}
	detail := "blocked: " + strings.Join(blocked, "; ")
	if len(targets) < 3 {
		detail += " (this host has no default IPv4 route: no LAN gateway to probe)"
	}
	return detail, nil
}

// probeTarget is one address the guest must not reach.
type probeTarget struct {
	what, addr string
	port       int
}

// probe connects from the guest with bash's /dev/tcp (the throwaway image
// has bash and nothing that speaks TCP otherwise), bounded by exec's
// --timeout; it reports whether the target answered and how.
func (s *state) probe(ctx context.Context, t probeTarget) (bool, string, error) {
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: s.d.Name, Timeout: probeTimeout,
		Argv: []string{"bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "probe", t.addr, strconv.Itoa(t.port)}})
	switch {
	case errors.Is(err, smolvm.ErrTimeout):
		return false, fmt.Sprintf("(no answer in %s)", probeTimeout), nil
	case err != nil:
		return false, "", err
	case res.ExitCode == 0:
		return true, "(connected)", nil
	case bytes.Contains(res.Stderr, []byte("Connection refused")):
		return true, "(refused: it answered)", nil
	}
	line := lastLine(string(res.Stderr))
	if i := strings.LastIndex(line, ": "); i >= 0 {
		line = line[i+2:] // bash: /dev/tcp/ADDR/PORT: Network is unreachable
	}
	return false, fmt.Sprintf("(%s)", line), nil
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
