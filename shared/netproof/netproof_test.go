package netproof

import (
	"strings"
	"testing"
)

func TestVerdict(t *testing.T) {
	neg := func(c Class, reached bool) Probe { return Probe{Class: c, Target: string(c) + ":1", Reached: reached} }
	all := []Probe{neg(DirectIP, false), neg(UnlistedHost, false), neg(IPv6, false), neg(HostLoopback, false), neg(Gateway, false)}
	ok := Proof{Mode: ModeStrict, Probes: append(all, Probe{Class: ListedHost, Target: "a.example.com:443", WantReach: true, Reached: true})}
	if err := ok.Verdict(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Class{DirectIP, UnlistedHost, IPv6, HostLoopback, Gateway} {
		p := Proof{Mode: ModeNone}
		for _, pr := range all {
			if pr.Class == c {
				pr.Reached = true
			}
			p.Probes = append(p.Probes, pr)
		}
		err := p.Verdict()
		if err == nil || !strings.Contains(err.Error(), string(c)+" probe "+string(c)+":1 was reachable") {
			t.Errorf("%s leak: %v", c, err)
		}
	}
	blocked := Proof{Mode: ModeStrict, Probes: append(all, Probe{Class: ListedHost, Target: "a.example.com:443", WantReach: true, Detail: "timeout"})}
	if err := blocked.Verdict(); err == nil || !strings.Contains(err.Error(), "listed-host probe a.example.com:443 was blocked (timeout)") {
		t.Errorf("blocked listed host: %v", err)
	}
	if err := (Proof{Mode: ModeNone, Probes: all[:4]}).Verdict(); err == nil || !strings.Contains(err.Error(), "no gateway probe ran") {
		t.Errorf("missing class: %v", err)
	}
}

// TestCovers: every planned target needs its probe, in the mode's
// direction; a proof that leaves one out (the box says what it ran) is not
// a proof, and its verdict says which is missing.
func TestCovers(t *testing.T) {
	plan := DefaultPlan(ModeStrict, []string{"a.example.com", "b.example.com"}, 2222)
	full := Proof{Mode: ModeStrict, Probes: []Probe{
		{Class: DirectIP, Target: "1.1.1.1:443"}, {Class: UnlistedHost, Target: "example.com:443"},
		{Class: IPv6, Target: "[2606:4700:4700::1111]:443"},
		{Class: HostLoopback, Target: "100.96.0.1:2222"}, {Class: HostLoopback, Target: "host.smolvm.internal:2222"},
		{Class: Gateway, Target: "10.0.2.2:2222"}, {Class: Gateway, Target: "10.0.2.2:22"},
		{Class: ListedHost, Target: "a.example.com:443", WantReach: true, Reached: true},
		{Class: ListedHost, Target: "b.example.com:443", WantReach: true, Reached: true},
	}}
	if err := full.Covers(plan); err != nil {
		t.Fatalf("a complete proof: %v", err)
	}
	for i, pr := range full.Probes {
		short := full
		short.Probes = append(append([]Probe(nil), full.Probes[:i]...), full.Probes[i+1:]...)
		err := short.Covers(plan)
		if err == nil || !strings.Contains(err.Error(), "no "+string(pr.Class)+" probe") {
			t.Errorf("without %s %s: %v", pr.Class, pr.Target, err)
		}
		short.Unproven = err.Error()
		if verr := short.Verdict(); verr == nil || !strings.Contains(verr.Error(), err.Error()) {
			t.Errorf("verdict without %s %s: %v", pr.Class, pr.Target, verr)
		}
	}
	// A listed host probed in the wrong direction is not its probe.
	flipped := full
	flipped.Probes = append([]Probe(nil), full.Probes...)
	flipped.Probes[7].WantReach = false
	if err := flipped.Covers(plan); err == nil || !strings.Contains(err.Error(), "no listed-host probe of a.example.com:443") {
		t.Errorf("a listed host probed as negative: %v", err)
	}
	// Mode none plans no listed host.
	none := DefaultPlan(ModeNone, nil, 2222)
	noneProof := Proof{Mode: ModeNone, Probes: full.Probes[:7]}
	if err := noneProof.Covers(none); err != nil {
		t.Errorf("mode none: %v", err)
	}
}

func TestPlanValidate(t *testing.T) {
	if err := DefaultPlan(ModeStrict, []string{"api.example.com"}, 2222).Validate(); err != nil {
		t.Error(err)
	}
	if err := DefaultPlan(ModeNone, []string{"ignored.example.com"}, 2222).Validate(); err != nil {
		t.Error(err)
	}
	for _, p := range []Plan{{Mode: "full"}, {Mode: ModeStrict}, {Mode: ModeNone, Allowed: []string{"x"}}, {Mode: ModeNone, TimeoutMillis: -1}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
