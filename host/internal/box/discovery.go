package box

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// restartBudget is how long the agent may take to restart the gateway.
const restartBudget = 2 * time.Minute

// refreshDiscovery runs once the box with Executor is healthy: the agent
// restarts the Hermes gateway once per boot (it keeps the boot's id), so a
// gateway that started before Executor was ready discovers its tools (the
// reference's per-boot restart). When it did restart, the box is waited
// for again.
func (b *Box) refreshDiscovery(ctx context.Context, name string, tr relay.Transport) error {
	done := b.ui.Step("discovery", "Hermes' MCP discovery of Executor's tools")
	restarted, err := b.askRefresh(ctx, tr)
	if err == nil && restarted {
		err = b.waitRunning(ctx, b.waiting(name, "the gateway of "+name+" to restart"), tr)
	}
	done(err)
	return err
}

func (b *Box) askRefresh(ctx context.Context, tr relay.Transport) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout+restartBudget)
	defer cancel()
	out := &capWriter{max: 4 << 10}
	if err := b.call(ctx, tr, []string{"executor", "refresh-discovery"}, nil, out); err != nil {
		return false, fmt.Errorf("refreshing Hermes' MCP discovery: %w", err)
	}
	var r protocol.DiscoveryRefresh
	if err := json.Unmarshal(out.buf.Bytes(), &r); err != nil {
		return false, fmt.Errorf("refreshing Hermes' MCP discovery: decoding the agent's answer: %w", err)
	}
	if r.Restarted {
		b.ui.Info("Executor is healthy; restarted the Hermes gateway so it discovers Executor's tools")
	}
	return r.Restarted, nil
}

// capWriter keeps what is written to it, refusing more than max bytes (the
// guest is not trusted to answer briefly).
type capWriter struct {
	buf bytes.Buffer
	max int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.max {
		return 0, fmt.Errorf("the agent's answer is longer than %d bytes", c.max)
	}
	return c.buf.Write(p)
}
