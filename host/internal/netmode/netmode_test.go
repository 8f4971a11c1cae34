package netmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hostagent "github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestOffer(t *testing.T) {
	old, _, _ := pins.Smolvm("1.0.4", false)
	cur, _, _ := pins.Smolvm("1.9.3", false)
	cases := []struct {
		mode    config.NetworkMode
		r       pins.SmolvmRelease
		hosts   []string
		wantErr string
	}{
		{config.NetworkFull, old, nil, ""},
		{config.NetworkFull, cur, nil, ""},
		{config.NetworkStrict, old, []string{"a.example.com"}, "HERMES_BOX_NETWORK_MODE=strict is refused on smolvm 1.0.4: that release drops --allow-host"},
		{config.NetworkNone, old, nil, "HERMES_BOX_NETWORK_MODE=none is refused on smolvm 1.0.4"},
		{config.NetworkStrict, cur, []string{"a.example.com"}, ""},
		{config.NetworkNone, cur, nil, ""},
		{config.NetworkStrict, cur, nil, "needs at least one host in network-hosts.txt"},
	}
	for _, c := range cases {
		err := Offer(c.mode, c.r, c.hosts)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s on %s: %v, want %q", c.mode, c.r.Version, err, c.wantErr)
		}
	}
	if e := Egress(config.NetworkStrict, []string{"a.example.com"}); len(e.AllowHosts) != 1 || e.LocalhostOnly {
		t.Errorf("strict egress %+v", e)
	}
	if e := Egress(config.NetworkNone, nil); !e.LocalhostOnly {
		t.Errorf("none egress %+v", e)
	}
}

type agent struct {
	proof netproof.Proof
	code  int
	plan  netproof.Plan
}

// Run answers as the agent's relay does.
func (a *agent) Run(_ context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, _ func(protocol.Event)) (int, error) {
	if strings.Join(req.Argv, " ") != "netprobe" || stdin == nil {
		return -1, errors.New("unexpected request")
	}
	if err := json.NewDecoder(stdin).Decode(&a.plan); err != nil {
		return -1, err
	}
	if a.code != 3 {
		_ = json.NewEncoder(stdout).Encode(a.proof)
	}
	return a.code, nil
}

// call is the agent client over a.
func (a *agent) call() *hostagent.Client { return hostagent.New(a, nil) }

type stopper struct{ stopped []string }

func (s *stopper) Stop(_ context.Context, name string) error {
	s.stopped = append(s.stopped, name)
	return nil
}

// proofOf is the agent's proof of plan in mode: a probe of every planned
// target (gateway on 10.0.2.2), the class leak reached.
func proofOf(mode string, leak netproof.Class) netproof.Proof {
	plan := netproof.DefaultPlan(netproof.ModeNone, nil, 2222)
	p := netproof.Proof{Mode: mode, Time: "2026-11-23T23:00:00Z"}
	add := func(c netproof.Class, target string) {
		p.Probes = append(p.Probes, netproof.Probe{Class: c, Target: target, Reached: c == leak})
	}
	add(netproof.DirectIP, plan.DirectIP)
	add(netproof.UnlistedHost, plan.UnlistedHost)
	add(netproof.IPv6, plan.IPv6)
	for _, t := range plan.HostLoopback {
		add(netproof.HostLoopback, t)
	}
	for _, port := range plan.GatewayPorts {
		add(netproof.Gateway, fmt.Sprintf("10.0.2.2:%d", port))
	}
	return p
}

func withoutLast(p netproof.Proof) netproof.Proof {
	p.Probes = p.Probes[:len(p.Probes)-1]
	return p
}

// TestProveStopsTheBox: a proof that holds keeps the box running and is
// recorded; a leak of any class, an unanswered probe or a proof of another
// mode stops it with the probe named.
func TestProveStopsTheBox(t *testing.T) {
	plan := netproof.DefaultPlan(netproof.ModeNone, nil, 2222)
	cases := []struct {
		name    string
		a       *agent
		wantErr string
	}{
		{"holds", &agent{proof: proofOf("none", "")}, ""},
		{"direct IP leaks", &agent{proof: proofOf("none", netproof.DirectIP), code: 1}, "direct-ip probe 1.1.1.1:443 was reachable; hermes-box was stopped"},
		{"agent leaves a probe out", &agent{proof: withoutLast(proofOf("none", ""))}, "no gateway probe on port 22; hermes-box was stopped"},
		{"unlisted host leaks", &agent{proof: proofOf("none", netproof.UnlistedHost), code: 1}, "unlisted-host probe"},
		{"IPv6 leaks", &agent{proof: proofOf("none", netproof.IPv6), code: 1}, "ipv6 probe"},
		{"host loopback leaks", &agent{proof: proofOf("none", netproof.HostLoopback), code: 1}, "host-loopback probe"},
		{"gateway leaks", &agent{proof: proofOf("none", netproof.Gateway), code: 1}, "gateway probe"},
		{"agent says all held, proof disagrees", &agent{proof: proofOf("none", netproof.Gateway), code: 0}, "gateway probe"},
		{"no proof", &agent{code: 3}, "exited with status 3 and no proof; hermes-box was stopped"},
		{"other mode", &agent{proof: proofOf("strict", "")}, `the agent proved "strict"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := &stopper{}
			_, err := Prove(context.Background(), c.a.call(), s, dir, "hermes-box", plan, nil)
			if c.wantErr == "" {
				if err != nil || len(s.stopped) != 0 {
					t.Fatalf("err %v, stopped %v", err, s.stopped)
				}
				p, ok, err := Last(dir, "hermes-box")
				if !ok || err != nil || !strings.Contains(Summary(config.NetworkNone, p, ok), "none, last proof 2026-11-23T23:00:00Z reported by the box: 7 probes held, not confirmed from outside it (this smolvm release records no egress denials") {
					t.Errorf("recorded proof: %v %v %s", ok, err, Summary(config.NetworkNone, p, ok))
				}
				if c.a.plan.HostLoopback[0] != "100.96.0.1:2222" || c.a.plan.Mode != "none" {
					t.Errorf("plan sent: %+v", c.a.plan)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || len(s.stopped) != 1 || s.stopped[0] != "hermes-box" {
				t.Fatalf("err %v, stopped %v; want %q", err, s.stopped, c.wantErr)
			}
		})
	}
}

// TestProofPerMachine: each machine's proof is its own, so a restore
// candidate's proof does not replace the box's and goes with the
// candidate; the single file of earlier releases stands for the box until
// the box records its own proof.
func TestProofPerMachine(t *testing.T) {
	dir := t.TempDir()
	plan := netproof.DefaultPlan(netproof.ModeNone, nil, 2222)
	legacy := proofOf("none", "")
	legacy.Time = "2026-01-01T00:00:00Z"
	b, err := json.Marshal(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filenames.NetworkProofLegacy), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := Last(dir, "hermes-box"); !ok || err != nil || p.Time != legacy.Time {
		t.Fatalf("the earlier release's proof is not the box's: %+v %v %v", p, ok, err)
	}
	if _, err := Prove(context.Background(), (&agent{proof: proofOf("none", "")}).call(), &stopper{}, dir, "hermes-box", plan, nil); err != nil {
		t.Fatal(err)
	}
	const candidate = "hermes-box-restore-42-1700000000000000000"
	leak := &agent{proof: proofOf("none", netproof.DirectIP), code: 1}
	leak.proof.Time = "2026-11-24T00:00:00Z"
	if _, err := Prove(context.Background(), leak.call(), &stopper{}, dir, candidate, plan, nil); err == nil {
		t.Fatal("the candidate's leak was not refused")
	}
	box, ok, err := Last(dir, "hermes-box")
	if !ok || err != nil || box.Time != "2026-11-23T23:00:00Z" || box.Verdict() != nil {
		t.Errorf("the box's proof after a candidate's: %+v %v %v", box, ok, err)
	}
	if p, ok, err := Last(dir, candidate); !ok || err != nil || p.Time != leak.proof.Time {
		t.Errorf("the candidate's proof: %+v %v %v", p, ok, err)
	}
	if err := Forget(dir, candidate); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, filenames.NetworkProof(candidate))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the candidate's proof outlived it: %v", err)
	}
	if err := Forget(dir, candidate); err != nil {
		t.Errorf("forgetting a proof twice: %v", err)
	}
}
