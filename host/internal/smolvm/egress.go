package smolvm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// EgressDenial is one outbound connection the VMM's egress policy refused,
// as `machine egress-events --json` prints it (src/agent/manager.rs,
// EgressDenial, from 1.8.1): the VMM's own record on the host, which
// nothing in the box can write.
type EgressDenial struct {
	// Timestamp is the VMM's RFC 3339 time, "" when the line had none.
	Timestamp string `json:"timestamp"`
	// Operation is "connect" (TCP), "sendto" (UDP) or "resolve" (DNS).
	Operation string `json:"operation"`
	// Dest is "ip:port" ("[v6]:port"), or the host name of a resolve.
	Dest string `json:"dest"`
}

// MaxEgressDenials is how many of the newest denials EgressDenials asks
// for (smolvm scans the last 256 KiB of its log, a few thousand lines).
const MaxEgressDenials = 2000

// EgressDenials returns the egress denials smolvm recorded for the
// machine, oldest first (`machine egress-events --name N --json`), on
// releases with EgressEvents.
func (d *Driver) EgressDenials(ctx context.Context, name string) ([]EgressDenial, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	res, err := d.run(ctx, "machine egress-events", name, Cmd{Args: []string{"machine", "egress-events", "--name", name,
		"--limit", strconv.Itoa(MaxEgressDenials), "--json"}})
	if err != nil {
		return nil, err
	}
	var out []EgressDenial
	if err := json.Unmarshal(res.Stdout, &out); err != nil || out == nil {
		return nil, fmt.Errorf("smolvm machine egress-events: output is not a JSON array: %q", truncate(res.Stdout))
	}
	return out, nil
}
