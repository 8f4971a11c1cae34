// Package netproof is the contract of the network-mode proof: the plan the
// host sends to the agent's `netprobe` verb at every start of a box whose
// mode is strict or none, the probes the agent reports, and the verdict
// that makes the host stop the box when a probe contradicts the mode.
//
// A negative probe (direct IP, unlisted host, IPv6, the host-loopback
// alias, the default gateway) must not complete a TCP handshake; a
// positive probe (each listed host) must. A refused connection or a
// failed lookup counts as blocked: only a completed handshake is reach.
package netproof

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// The modes that are proven.
const (
	ModeStrict = "strict"
	ModeNone   = "none"
)

// Class is what a probe tries.
type Class string

// The probe classes.
const (
	DirectIP     Class = "direct-ip"
	UnlistedHost Class = "unlisted-host"
	IPv6         Class = "ipv6"
	HostLoopback Class = "host-loopback"
	Gateway      Class = "gateway"
	ListedHost   Class = "listed-host"
)

// Plan is the request document of `netprobe` (on stdin).
type Plan struct {
	Mode string `json:"mode"`
	// Allowed are the hosts of network-hosts.txt (strict only).
	Allowed []string `json:"allowed,omitempty"`
	// AllowedPort is the port each allowed host is probed on (443).
	AllowedPort int `json:"allowedPort,omitempty"`
	// DirectIP, UnlistedHost and IPv6 are host:port targets.
	DirectIP     string `json:"directIP,omitempty"`
	UnlistedHost string `json:"unlistedHost,omitempty"`
	IPv6         string `json:"ipv6,omitempty"`
	// HostLoopback are host:port targets that reach the host's loopback
	// services when the floor is open (100.96.0.1, host.smolvm.internal).
	HostLoopback []string `json:"hostLoopback,omitempty"`
	// GatewayPorts are probed on the guest's default IPv4 gateway.
	GatewayPorts []int `json:"gatewayPorts,omitempty"`
	// TimeoutMillis bounds each probe.
	TimeoutMillis int `json:"timeoutMillis,omitempty"`
	// Resolve maps names to addresses instead of DNS (tests only).
	Resolve map[string]string `json:"resolve,omitempty"`
}

// DefaultPlan is the production plan for mode: public targets for the
// outside classes, the host's loopback alias on the box's own published
// SSH port (which certainly listens on the host's loopback), the gateway
// on that port and 22.
func DefaultPlan(mode string, allowed []string, hostSSHPort int) Plan {
	p := Plan{Mode: mode, AllowedPort: 443, DirectIP: "1.1.1.1:443", UnlistedHost: "example.com:443",
		IPv6: "[2606:4700:4700::1111]:443", TimeoutMillis: 3000,
		HostLoopback: []string{fmt.Sprintf("100.96.0.1:%d", hostSSHPort), fmt.Sprintf("host.smolvm.internal:%d", hostSSHPort)},
		GatewayPorts: []int{hostSSHPort, 22}}
	if mode == ModeStrict {
		p.Allowed = allowed
	}
	return p
}

// Validate checks the plan.
func (p Plan) Validate() error {
	var errs []error
	if p.Mode != ModeStrict && p.Mode != ModeNone {
		errs = append(errs, fmt.Errorf("mode %q: want strict or none", p.Mode))
	}
	if p.Mode == ModeNone && len(p.Allowed) > 0 {
		errs = append(errs, errors.New("mode none allows no host"))
	}
	if p.Mode == ModeStrict && len(p.Allowed) == 0 {
		errs = append(errs, errors.New("mode strict needs at least one allowed host (network-hosts.txt)"))
	}
	if p.TimeoutMillis < 0 || p.TimeoutMillis > 60000 {
		errs = append(errs, fmt.Errorf("timeoutMillis %d: want 0 to 60000", p.TimeoutMillis))
	}
	if len(p.Allowed) > 256 || len(p.HostLoopback) > 16 || len(p.GatewayPorts) > 16 {
		errs = append(errs, errors.New("too many probe targets"))
	}
	return errors.Join(errs...)
}

// Probe is one probe's outcome.
type Probe struct {
	Class  Class  `json:"class"`
	Target string `json:"target"`
	// WantReach is true for positive probes.
	WantReach bool `json:"wantReach"`
	Reached   bool `json:"reached"`
	// Detail is the error of a blocked probe, or the peer address.
	Detail string `json:"detail,omitempty"`
}

// Holds says whether the probe agrees with the mode.
func (p Probe) Holds() bool { return p.Reached == p.WantReach }

// Proof is what `netprobe` prints.
type Proof struct {
	Mode   string  `json:"mode"`
	Time   string  `json:"time"`
	Probes []Probe `json:"probes"`
	// Unproven is the host's note of the planned probes the proof lacks
	// (Covers); the agent never sets it.
	Unproven string `json:"unproven,omitempty"`
	// Confirmed and Evidence are the host's check of the proof against
	// what smolvm recorded outside the box (its egress denials): Confirmed
	// when they agree, Evidence saying what was found. The host sets both;
	// what the agent sends there is discarded.
	Confirmed bool   `json:"confirmed,omitempty"`
	Evidence  string `json:"evidence,omitempty"`
}

// Verdict returns nil when every probe holds and there was at least one
// negative probe of each class; otherwise an error naming each
// contradicting probe, for the host to stop the box with.
func (p Proof) Verdict() error {
	var bad []string
	seen := map[Class]bool{}
	for _, pr := range p.Probes {
		seen[pr.Class] = true
		switch {
		case pr.Holds():
		case pr.WantReach:
			bad = append(bad, fmt.Sprintf("%s probe %s was blocked (%s)", pr.Class, pr.Target, pr.Detail))
		default:
			bad = append(bad, fmt.Sprintf("%s probe %s was reachable", pr.Class, pr.Target))
		}
	}
	for _, c := range []Class{DirectIP, UnlistedHost, IPv6, HostLoopback, Gateway} {
		if !seen[c] {
			bad = append(bad, fmt.Sprintf("no %s probe ran", c))
		}
	}
	if p.Unproven != "" {
		bad = append(bad, p.Unproven)
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("network mode %s is not in force: %s", p.Mode, strings.Join(bad, "; "))
}

// Covers returns nil when the proof holds a probe for every target of plan,
// with the direction the mode needs: one per outside target, per
// host-loopback target, per gateway port and, in strict mode, per allowed
// host. The proof comes from the box, so a probe it left out is a probe
// that did not hold.
func (p Proof) Covers(plan Plan) error {
	type key struct {
		class  Class
		target string
		reach  bool
	}
	ran := map[key]bool{}
	gatewayPorts := map[string]bool{}
	for _, pr := range p.Probes {
		ran[key{pr.Class, pr.Target, pr.WantReach}] = true
		if _, port, err := net.SplitHostPort(pr.Target); pr.Class == Gateway && !pr.WantReach && err == nil {
			gatewayPorts[port] = true
		}
	}
	var missing []string
	want := func(c Class, target string, reach bool) {
		if target != "" && !ran[key{c, target, reach}] {
			missing = append(missing, fmt.Sprintf("no %s probe of %s", c, target))
		}
	}
	want(DirectIP, plan.DirectIP, false)
	want(UnlistedHost, plan.UnlistedHost, false)
	want(IPv6, plan.IPv6, false)
	for _, t := range plan.HostLoopback {
		want(HostLoopback, t, false)
	}
	for _, port := range plan.GatewayPorts {
		if !gatewayPorts[strconv.Itoa(port)] {
			missing = append(missing, fmt.Sprintf("no %s probe on port %d", Gateway, port))
		}
	}
	if plan.Mode == ModeStrict {
		for _, h := range plan.Allowed {
			want(ListedHost, net.JoinHostPort(h, strconv.Itoa(plan.AllowedPort)), true)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New(strings.Join(missing, "; "))
}
