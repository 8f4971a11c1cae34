package box

import (
	"context"
	"fmt"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// Start starts the box and verifies it, under the operation lock.
func Start(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "start", withLock(b, func() error { return startBox(ctx, b) }))
}

// startBox starts the box, or verifies it when it already runs (a failed
// verification of a box that was already running does not stop it).
func startBox(ctx context.Context, b *Box) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := checkExecutorWiring(b, m); err != nil {
		return err
	}
	warnDrift(b)
	if m.State == smolvm.StateRunning {
		b.ui.Info("%s is already running; verifying it", m.Name)
		return verifyRunning(ctx, b)
	}
	if m.State == smolvm.StatePaused || m.State == smolvm.StatePausing {
		return &userr.Error{Err: fmt.Errorf("the box %s is %s (smolvm machine pause froze it); nothing was changed", m.Name, m.State),
			Next: "resume it with: smolvm machine resume --name " + m.Name + " (then hermes-box start verifies it)"}
	}
	if err := checkSmolvmVersion(ctx, b); err != nil {
		return err
	}
	if err := checkAgentSocket(b); err != nil {
		return err
	}
	if err := bootAndVerify(ctx, b, m.Name); err != nil {
		return err
	}
	b.ui.Info("%s is running and healthy: hermes-box ssh", m.Name)
	return nil
}
