package box

import (
	"context"
	"fmt"

	"github.com/hermes-box/hermes-box/host/internal/relay"
)

// refreshDiscovery runs once the box with Executor is healthy: the agent
// restarts the Hermes gateway once per boot (it keeps the boot's id), so a
// gateway that started before Executor was ready discovers its tools (the
// reference's per-boot restart). When it did restart, the box is waited
// for again.
func refreshDiscovery(ctx context.Context, b *Box, name string, tr relay.Transport) error {
	done := b.ui.Step("discovery", "Hermes' MCP discovery of Executor's tools")
	restarted, err := askRefresh(ctx, b, tr)
	if err == nil && restarted {
		err = waitRunning(ctx, b, waiting(b, name, "the gateway of "+name+" to restart"), tr)
	}
	done(err)
	return err
}

func askRefresh(ctx context.Context, b *Box, tr relay.Transport) (bool, error) {
	r, err := client(b, tr).RefreshDiscovery(ctx)
	if err != nil {
		return false, fmt.Errorf("refreshing Hermes' MCP discovery: %w", err)
	}
	if r.Restarted {
		b.ui.Info("Executor is healthy; restarted the Hermes gateway so it discovers Executor's tools")
	}
	return r.Restarted, nil
}
