package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

func newStopCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the box's services gracefully, then the machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			return a.withLock(func() error { return a.stopBox(cmd.Context()) })
		},
	}
}

// stopBox asks the agent to stop every service (tolerating an agent that
// cannot), then stops the machine.
func (a *app) stopBox(ctx context.Context) error {
	m, err := a.machineState(ctx, a.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning && m.State != smolvm.StateUnreachable {
		a.ui.Info("%s is %s; nothing to stop", m.Name, m.State)
		return nil
	}
	if m.State == smolvm.StateRunning {
		a.stopServices(ctx)
	}
	done := a.ui.Step("stop", m.Name)
	err = a.vm.Stop(ctx, m.Name)
	done(err)
	return err
}

// stopServices runs the agent's `services stop all` over the SSH relay. It
// only warns when that fails: the machine stop that follows ends them too.
func (a *app) stopServices(ctx context.Context) {
	tr, err := a.sshRelay()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, a.timing.callTimeout)
		defer cancel()
		done := a.ui.Step("services-stop", "all services")
		err = a.agent(ctx, tr, nil, nil, "services", "stop", "all")
		done(err)
	}
	var exit *agentExit
	if errors.As(err, &exit) && exit.code == 2 {
		a.ui.Warn("the agent has no services verb; stopping the machine directly")
		return
	}
	if err != nil {
		a.ui.Warn("could not stop the services gracefully (%v); stopping the machine", err)
	}
}
