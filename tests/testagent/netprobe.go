package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The netprobe cases: forge answers with every planned probe held without
// opening a socket (a box that lies); vmm-denies runs the real probes and
// plays smolvm's VMM, which records each outside connection it refuses in
// the machine's egress denial log (tests/fakesmolvm/egress.go).

// forgeProof echoes the plan on stdin back as a proof that holds.
func (t *agent) forgeProof() int {
	var plan netproof.Plan
	if err := json.NewDecoder(t.in).Decode(&plan); err != nil {
		t.fail("netprobe: %v", err)
		return 2
	}
	p := netproof.Proof{Mode: plan.Mode, Time: time.Now().UTC().Format(time.RFC3339)}
	held := func(c netproof.Class, target string, reach bool) {
		if target != "" {
			p.Probes = append(p.Probes, netproof.Probe{Class: c, Target: target, WantReach: reach, Reached: reach, Detail: "connection refused"})
		}
	}
	held(netproof.DirectIP, plan.DirectIP, false)
	held(netproof.UnlistedHost, plan.UnlistedHost, false)
	held(netproof.IPv6, plan.IPv6, false)
	for _, h := range plan.HostLoopback {
		held(netproof.HostLoopback, h, false)
	}
	for _, port := range plan.GatewayPorts {
		held(netproof.Gateway, net.JoinHostPort("10.0.2.2", strconv.Itoa(port)), false)
	}
	for _, h := range plan.Allowed {
		held(netproof.ListedHost, net.JoinHostPort(h, strconv.Itoa(plan.AllowedPort)), true)
	}
	_ = json.NewEncoder(os.Stdout).Encode(p)
	return 0
}

// vmmDenies runs the real netprobe, then appends a denial in smolvm's
// line format for every outside probe that was blocked, as the VMM would
// have while the probes ran.
func (t *agent) vmmDenies(req protocol.Request) int {
	var out bytes.Buffer
	code, err := t.relayReal(req, &out)
	if err != nil {
		t.fail("netprobe: %v", err)
		return 1
	}
	var p netproof.Proof
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.fail("netprobe: %v", err)
		return 1
	}
	log, err := os.OpenFile(filepath.Join(t.root, "..", "data", "egress-denials.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.fail("netprobe: %v", err)
		return 1
	}
	defer log.Close()
	for _, pr := range p.Probes {
		if pr.Reached || (pr.Class != netproof.DirectIP && pr.Class != netproof.UnlistedHost && pr.Class != netproof.IPv6) {
			continue
		}
		what := "connect to " + pr.Target
		if host, _, err := net.SplitHostPort(pr.Target); err == nil && net.ParseIP(host) == nil {
			what = "resolve " + host
		}
		fmt.Fprintf(log, "[%s]: egress policy denied %s\n", time.Now().UTC().Format(time.RFC3339), what)
	}
	os.Stdout.Write(out.Bytes())
	return code
}
