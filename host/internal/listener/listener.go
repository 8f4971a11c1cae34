// Package listener checks that a published port listens on loopback only.
// smolvm 1.0.4 has no bind-address flag for `-p`, so hermes-box verifies the
// listening sockets after every start: on Linux from /proc/net/tcp and
// /proc/net/tcp6, on macOS from `lsof -nP -F n -iTCP:PORT -sTCP:LISTEN`.
package listener

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoListener is wrapped when nothing listens on the port.
var ErrNoListener = errors.New("no listener found")

// ErrNotLoopback is wrapped when a listener is bound beyond loopback.
var ErrNotLoopback = errors.New("not loopback-only")

// Checker finds the addresses listening on a TCP port.
type Checker struct {
	// ProcDir is the proc file system on Linux; "" means /proc.
	ProcDir string
	// Lsof runs lsof on macOS; nil runs the system's.
	Lsof func(ctx context.Context, args ...string) ([]byte, error)
	// GOOS overrides runtime.GOOS (tests).
	GOOS string
	// UID overrides the effective uid the Linux owner check judges
	// sockets against (tests); nil means os.Geteuid().
	UID *int
}

// Listening returns the local addresses listening on TCP port, as
// host:port strings, sorted.
func (c Checker) Listening(ctx context.Context, port int) ([]string, error) {
	switch c.goos() {
	case "linux":
		return c.fromProc(port)
	case "darwin":
		return c.fromLsof(ctx, port)
	}
	return nil, fmt.Errorf("checking listeners: unsupported host OS %s", c.goos())
}

// CheckLoopback returns nil when something listens on port and every
// listener is bound to 127.0.0.1 or ::1.
func (c Checker) CheckLoopback(ctx context.Context, port int) error {
	addrs, err := c.Listening(ctx, port)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return fmt.Errorf("port %d: %w", port, ErrNoListener)
	}
	var unsafe []string
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			unsafe = append(unsafe, a)
		}
	}
	if len(unsafe) > 0 {
		return fmt.Errorf("port %d is %w: listening on %s", port, ErrNotLoopback, strings.Join(unsafe, ", "))
	}
	return nil
}

// fromProc reads the LISTEN sockets (state 0A) of /proc/net/tcp{,6}.
func (c Checker) fromProc(port int) ([]string, error) {
	var out []string
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(c.proc(), "net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue // no IPv6 on this host
		}
		if err != nil {
			return nil, fmt.Errorf("checking listeners: %w", err)
		}
		addrs, err := ParseProcNet(b, port)
		if err != nil {
			return nil, fmt.Errorf("checking listeners in %s: %w", name, err)
		}
		out = append(out, addrs...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ParseProcNet returns the listening addresses on port in the text of
// /proc/net/tcp or /proc/net/tcp6.
func ParseProcNet(b []byte, port int) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if n == 1 || len(fields) < 4 {
			continue // header
		}
		if fields[3] != "0A" {
			continue
		}
		ip, p, err := parseHexAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if p == port {
			out = append(out, net.JoinHostPort(ip.String(), strconv.Itoa(p)))
		}
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:1F90": the address in host byte order
// (little-endian 32-bit words on the hosts hermes-box supports), then the
// port in hex.
func parseHexAddr(s string) (net.IP, int, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("bad port in %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	return ip, int(port), nil
}

// fromLsof parses `lsof -F n` output: one "n<host>:<port>" line per socket.
func (c Checker) fromLsof(ctx context.Context, port int) ([]string, error) {
	out, err := c.lsof(ctx, "-nP", "-F", "n", "-iTCP:"+strconv.Itoa(port), "-sTCP:LISTEN")
	if err != nil {
		return nil, err
	}
	return ParseLsof(out, port)
}

// lsof runs lsof with args; its status 1 with no output (nothing listens)
// is no error.
func (c Checker) lsof(ctx context.Context, args ...string) ([]byte, error) {
	run := c.Lsof
	if run == nil {
		run = func(ctx context.Context, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, "lsof", args...).Output()
		}
	}
	out, err := run(ctx, args...)
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && len(bytes.TrimSpace(out)) == 0) {
		return nil, fmt.Errorf("checking listeners with lsof: %w", err)
	}
	return out, nil
}

// ParseLsof returns the listening addresses on port in `lsof -F n` output.
func ParseLsof(b []byte, port int) ([]string, error) {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "n")
		if !ok {
			continue
		}
		host, p, err := net.SplitHostPort(name)
		if err != nil {
			return nil, fmt.Errorf("lsof endpoint %q: %w", name, err)
		}
		if host == "*" {
			host = "0.0.0.0"
		}
		if p == strconv.Itoa(port) {
			out = append(out, net.JoinHostPort(host, p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
