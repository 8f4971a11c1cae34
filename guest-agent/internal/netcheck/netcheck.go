// Package netcheck tells whether a builder's network is ready for package
// installation: a default IPv4 route (read from /proc/net/route) and an
// IPv4 answer from DNS for the package archive's host.
package netcheck

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up addresses; *net.Resolver is one.
type Resolver interface {
	LookupIP(ctx context.Context, network, host string) ([]net.IP, error)
}

// Options say where to look; zero fields take the defaults.
type Options struct {
	// ProcDir is the proc file system (default /proc).
	ProcDir string
	// Resolver answers DNS (default net.DefaultResolver).
	Resolver Resolver
	// Host is the name to resolve, for example ports.ubuntu.com.
	Host string
	// Timeout bounds the DNS lookup (default 5s).
	Timeout time.Duration
}

// Result is the JSON the netcheck verb prints.
type Result struct {
	Ready bool        `json:"ready"`
	Route RouteResult `json:"route"`
	DNS   DNSResult   `json:"dns"`
}

// RouteResult is the default IPv4 route, if any.
type RouteResult struct {
	OK        bool   `json:"ok"`
	Interface string `json:"interface,omitempty"`
	Gateway   string `json:"gateway,omitempty"`
	Error     string `json:"error,omitempty"`
}

// DNSResult is the IPv4 answer for the package host.
type DNSResult struct {
	OK        bool     `json:"ok"`
	Host      string   `json:"host"`
	Addresses []string `json:"addresses,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// PackageHost is the Ubuntu archive host the builder installs from.
func PackageHost(arch string) string {
	if arch == "amd64" {
		return "archive.ubuntu.com"
	}
	return "ports.ubuntu.com"
}

// Check runs both probes.
func Check(ctx context.Context, o Options) Result {
	if o.ProcDir == "" {
		o.ProcDir = "/proc"
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	var r Result
	b, err := os.ReadFile(filepath.Join(o.ProcDir, "net", "route"))
	if err == nil {
		var iface, gw string
		iface, gw, err = DefaultRoute(b)
		r.Route = RouteResult{OK: err == nil, Interface: iface, Gateway: gw}
	}
	if err != nil {
		r.Route.Error = err.Error()
	}
	r.DNS = lookup(ctx, o)
	r.Ready = r.Route.OK && r.DNS.OK
	return r
}

func lookup(ctx context.Context, o Options) DNSResult {
	d := DNSResult{Host: o.Host}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ips, err := o.Resolver.LookupIP(ctx, "ip4", o.Host)
	if err != nil {
		d.Error = fmt.Sprintf("resolving %s over IPv4: %v", o.Host, err)
		return d
	}
	for _, ip := range ips {
		if ip4 := ip.To4(); ip4 != nil {
			d.Addresses = append(d.Addresses, ip4.String())
		}
	}
	if len(d.Addresses) == 0 {
		d.Error = "no IPv4 address for " + o.Host
		return d
	}
	d.OK = true
	return d
}

// The route flags that make a usable default route.
const (
	rtfUp      = 0x1
	rtfGateway = 0x2
)

// DefaultRoute finds an up IPv4 default route through a gateway in the
// text of /proc/net/route and returns its interface and gateway.
func DefaultRoute(table []byte) (iface, gateway string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(table))
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if line == 1 || len(f) == 0 {
			continue // the header
		}
		if len(f) < 8 {
			return "", "", fmt.Errorf("/proc/net/route line %d: %d fields, want at least 8", line, len(f))
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil {
			return "", "", fmt.Errorf("/proc/net/route line %d: flags %q: %w", line, f[3], err)
		}
		if f[1] != "00000000" || f[7] != "00000000" || flags&(rtfUp|rtfGateway) != rtfUp|rtfGateway {
			continue
		}
		gw, err := hexIPv4(f[2])
		if err != nil {
			return "", "", fmt.Errorf("/proc/net/route line %d: gateway: %w", line, err)
		}
		return f[0], gw, nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading /proc/net/route: %w", err)
	}
	return "", "", fmt.Errorf("no default IPv4 route through a gateway")
}

// hexIPv4 decodes the kernel's little-endian hex address.
func hexIPv4(s string) (string, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return "", fmt.Errorf("%q is not an IPv4 address in hex", s)
	}
	var ip [4]byte
	binary.BigEndian.PutUint32(ip[:], binary.LittleEndian.Uint32(b))
	return net.IP(ip[:]).String(), nil
}
