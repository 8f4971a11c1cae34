package netmode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// TestProofCorroborated: a proof that holds is confirmed only when smolvm
// recorded, since the probes began, a denial for every outside target the
// box reports blocked and none for a target it reports reached; otherwise
// status shows it as the box's word, saying why.
func TestProofCorroborated(t *testing.T) {
	plan := netproof.DefaultPlan(netproof.ModeNone, nil, 2222)
	now := time.Now().UTC()
	stamp := now.Add(2 * time.Second).Format(time.RFC3339)
	all := []smolvm.EgressDenial{
		{Timestamp: stamp, Operation: "connect", Dest: "1.1.1.1:443"},
		{Timestamp: stamp, Operation: "resolve", Dest: "Example.COM."},
		{Timestamp: stamp, Operation: "connect", Dest: "[2606:4700:4700:0:0:0:0:1111]:443"},
	}
	tests := []struct {
		name    string
		denials Denials
		proof   netproof.Proof
		want    string // in the summary
	}{
		{"every outside target denied", deny(all...), proofOf("none", ""), "confirmed by smolvm (smolvm's own egress denials show each of the 3 outside targets blocked)"},
		{"forged: no denial at all", deny(), proofOf("none", ""), "reported by the box: 7 probes held, not confirmed from outside it (smolvm recorded no egress denial for 1.1.1.1:443, example.com:443, [2606:4700:4700::1111]:443, which the box reports blocked)"},
		{"one missing", deny(all[0], all[2]), proofOf("none", ""), "no egress denial for example.com:443,"},
		{"denials from before the probes", deny(smolvm.EgressDenial{Timestamp: now.Add(-time.Hour).Format(time.RFC3339), Operation: "connect", Dest: "1.1.1.1:443"}, all[1], all[2]), proofOf("none", ""), "no egress denial for 1.1.1.1:443,"},
		{"a reached target denied", deny(append(all, smolvm.EgressDenial{Timestamp: stamp, Operation: "resolve", Dest: "allowed.example.com"})...), withReached(proofOf("none", ""), "allowed.example.com:443"), "smolvm denied allowed.example.com:443, which the box reports reached"},
		{"agent claims confirmation", deny(), confirmedByAgent(proofOf("none", "")), "reported by the box"},
		{"release without egress-events", nil, proofOf("none", ""), "this smolvm release records no egress denials"},
		{"egress-events fails", func(context.Context) ([]smolvm.EgressDenial, error) { return nil, errors.New("boom") }, proofOf("none", ""), "could not be read: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			a := &agent{proof: tt.proof}
			if _, err := Prove(context.Background(), a.call(), &stopper{}, dir, "hermes-box", plan, tt.denials); err != nil {
				t.Fatal(err)
			}
			p, ok, err := Last(dir, "hermes-box")
			if s := Summary(config.NetworkNone, p, ok); err != nil || !strings.Contains(s, tt.want) {
				t.Fatalf("summary %q (%v), want %q", s, err, tt.want)
			}
			if p.Confirmed != strings.Contains(tt.want, "confirmed by smolvm") {
				t.Fatalf("confirmed = %v", p.Confirmed)
			}
		})
	}
}

func deny(ds ...smolvm.EgressDenial) Denials {
	return func(context.Context) ([]smolvm.EgressDenial, error) {
		return append([]smolvm.EgressDenial{}, ds...), nil
	}
}

func withReached(p netproof.Proof, target string) netproof.Proof {
	p.Probes = append(p.Probes, netproof.Probe{Class: netproof.ListedHost, Target: target, WantReach: true, Reached: true})
	return p
}

func confirmedByAgent(p netproof.Proof) netproof.Proof {
	p.Confirmed, p.Evidence = true, "trust me"
	return p
}
