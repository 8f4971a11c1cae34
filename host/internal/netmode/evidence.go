package netmode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// Denials reads the egress denials smolvm's VMM recorded for the machine
// (`machine egress-events`); nil on a release without them (before 1.8.1).
type Denials func(ctx context.Context) ([]smolvm.EgressDenial, error)

// outside are the probe classes that aim past the host: smolvm's egress
// policy refuses them, and records each refusal.
var outside = map[netproof.Class]bool{netproof.DirectIP: true, netproof.UnlistedHost: true, netproof.IPv6: true}

// denialSlack allows for the VMM's timestamps (whole seconds) against the
// host's clock at the start of the probes.
const denialSlack = time.Second

// corroborate checks the box's proof against what smolvm recorded on the
// host since the probes began: every outside target the box reports
// blocked must be among the denials, and no target it reports reached.
// Only then is the proof Confirmed; Evidence says what was found.
func corroborate(ctx context.Context, p *netproof.Proof, denials Denials, since time.Time) {
	p.Confirmed, p.Evidence = false, ""
	if denials == nil {
		p.Evidence = "this smolvm release records no egress denials (machine egress-events, 1.8.1 and later)"
		return
	}
	ds, err := denials(ctx)
	if err != nil {
		p.Evidence = "smolvm's egress denials could not be read: " + err.Error()
		return
	}
	denied := map[string]bool{}
	for _, d := range ds {
		t, err := time.Parse(time.RFC3339Nano, d.Timestamp)
		if err == nil && !t.Before(since.Add(-denialSlack)) {
			denied[denialKey(d.Operation, d.Dest)] = true
		}
	}
	var missing, contradicted []string
	checked := 0
	for _, pr := range p.Probes {
		hit := denied[probeKey(pr.Target)]
		switch {
		case pr.Reached && hit:
			contradicted = append(contradicted, pr.Target)
		case outside[pr.Class] && !pr.Reached && !hit:
			missing = append(missing, pr.Target)
		case outside[pr.Class] && !pr.Reached:
			checked++
		}
	}
	var why []string
	if len(missing) > 0 {
		why = append(why, "smolvm recorded no egress denial for "+strings.Join(missing, ", ")+", which the box reports blocked")
	}
	if len(contradicted) > 0 {
		why = append(why, "smolvm denied "+strings.Join(contradicted, ", ")+", which the box reports reached")
	}
	if checked == 0 && len(why) == 0 {
		why = append(why, "no outside target was probed")
	}
	if len(why) > 0 {
		p.Evidence = strings.Join(why, "; ")
		return
	}
	p.Confirmed = true
	p.Evidence = fmt.Sprintf("smolvm's own egress denials show each of the %d outside targets blocked", checked)
}

// probeKey is the denial a probe of target would leave: a connect or
// sendto of its address, or the refused lookup of its host name.
func probeKey(target string) string {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil {
		return "addr " + net.JoinHostPort(ip.String(), port)
	}
	return "resolve " + strings.ToLower(strings.TrimSuffix(host, "."))
}

// denialKey is a denial in probeKey's terms.
func denialKey(op, dest string) string {
	switch op {
	case "connect", "sendto":
		host, port, err := net.SplitHostPort(dest)
		if ip := net.ParseIP(host); err == nil && ip != nil {
			return "addr " + net.JoinHostPort(ip.String(), port)
		}
	case "resolve":
		return "resolve " + strings.ToLower(strings.TrimSuffix(dest, "."))
	}
	return ""
}
