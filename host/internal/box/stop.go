package box

import (
	"context"
	"errors"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// Stop stops the box's services, then the machine, under the operation
// lock.
func Stop(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "stop", withLock(b, func() error { return stopBox(ctx, b) }))
}

// stopBox asks the agent to stop every service (tolerating an agent that
// cannot), then stops the machine.
func stopBox(ctx context.Context, b *Box) error {
	return stopBoxChecked(ctx, b, func(smolvm.Machine) error { return nil })
}

// stopBoxChecked is stopBox that first runs check on the machine and
// changes nothing when it fails.
func stopBoxChecked(ctx context.Context, b *Box, check func(smolvm.Machine) error) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := check(m); err != nil {
		return err
	}
	if m.State != smolvm.StateRunning && m.State != smolvm.StateUnreachable {
		b.ui.Info("%s is %s; nothing to stop", m.Name, m.State)
		return nil
	}
	if m.State == smolvm.StateRunning {
		stopServices(ctx, b)
	}
	done := b.ui.Step("stop", m.Name)
	err = b.vm.Stop(ctx, m.Name)
	done(err)
	return err
}

// stopServices runs the agent's `services stop all` over the SSH relay. It
// only warns when that fails: the machine stop that follows ends them too.
func stopServices(ctx context.Context, b *Box) {
	tr, err := sshRelay(b)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
		defer cancel()
		done := b.ui.Step("services-stop", "all services")
		err = client(b, tr).StopService(ctx, "all")
		done(err)
	}
	var exit *agent.ExitError
	if errors.As(err, &exit) && exit.Code == 2 {
		b.ui.Warn("the agent has no services verb; stopping the machine directly")
		return
	}
	if err != nil {
		b.ui.Warn("could not stop the services gracefully (%v); stopping the machine", err)
	}
}
