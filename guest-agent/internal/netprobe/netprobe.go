// Package netprobe runs the network-mode proof inside the box: every
// negative probe of a shared/netproof plan must fail to complete a TCP
// handshake, every positive one must complete it. Probes run concurrently,
// each bounded by the plan's timeout; nothing is sent but the handshake.
package netprobe

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/netcheck"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// Options say where the guest's routing table is (default /proc).
type Options struct {
	ProcDir string
	Now     func() time.Time
}

type target struct {
	class     netproof.Class
	addr      string
	wantReach bool
	// err is set when the target could not even be formed (no gateway).
	err error
}

// Run probes plan and returns the proof; it does not judge it (Verdict).
func Run(ctx context.Context, plan netproof.Plan, o Options) netproof.Proof {
	if o.ProcDir == "" {
		o.ProcDir = "/proc"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	timeout := time.Duration(plan.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	targets := targetsOf(plan, o.ProcDir)
	proof := netproof.Proof{Mode: plan.Mode, Time: o.Now().UTC().Format(time.RFC3339), Probes: make([]netproof.Probe, len(targets))}
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proof.Probes[i] = probe(ctx, t, plan.Resolve, timeout)
		}()
	}
	wg.Wait()
	return proof
}

func targetsOf(plan netproof.Plan, procDir string) []target {
	ts := []target{
		{class: netproof.DirectIP, addr: plan.DirectIP},
		{class: netproof.UnlistedHost, addr: plan.UnlistedHost},
		{class: netproof.IPv6, addr: plan.IPv6},
	}
	for _, a := range plan.HostLoopback {
		ts = append(ts, target{class: netproof.HostLoopback, addr: a})
	}
	gw, err := defaultGateway(procDir)
	for _, port := range plan.GatewayPorts {
		ts = append(ts, target{class: netproof.Gateway, addr: net.JoinHostPort(gw, strconv.Itoa(port)), err: err})
	}
	for _, h := range plan.Allowed {
		ts = append(ts, target{class: netproof.ListedHost, addr: net.JoinHostPort(h, strconv.Itoa(plan.AllowedPort)), wantReach: true})
	}
	return ts
}

// defaultGateway is the IPv4 default route's gateway.
func defaultGateway(procDir string) (string, error) {
	table, err := os.ReadFile(filepath.Join(procDir, "net", "route"))
	if err != nil {
		return "", fmt.Errorf("reading the routing table: %w", err)
	}
	_, gw, err := netcheck.DefaultRoute(table)
	if err != nil {
		return "", err
	}
	return gw, nil
}

// probe tries one TCP handshake and closes the connection at once.
func probe(ctx context.Context, t target, resolve map[string]string, timeout time.Duration) netproof.Probe {
	p := netproof.Probe{Class: t.class, Target: t.addr, WantReach: t.wantReach}
	if t.err != nil {
		p.Detail = t.err.Error()
		return p
	}
	addr := t.addr
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip, ok := resolve[host]; ok {
			addr = net.JoinHostPort(ip, port)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		p.Detail = err.Error()
		return p
	}
	p.Reached, p.Detail = true, "connected to "+c.RemoteAddr().String()
	_ = c.Close()
	return p
}
