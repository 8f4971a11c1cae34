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
