package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

func newStartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Start the box and verify it (loopback-only SSH, agent health)",
		Long: "start boots the box, waits for its SSH port, checks that every published port listens on\n" +
			"loopback only and that the agent reports healthy. If verification fails the box is stopped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			return a.withLock(func() error { return a.startBox(cmd.Context()) })
		},
	}
}

// startBox starts the box, or verifies it when it already runs (a failed
// verification of a box that was already running does not stop it).
func (a *app) startBox(ctx context.Context) error {
	m, err := a.machineState(ctx, a.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State == smolvm.StateRunning {
		a.ui.Info("%s is already running; verifying it", m.Name)
		return a.verifyRunning(ctx)
	}
	if err := a.bootAndVerify(ctx, m.Name); err != nil {
		return err
	}
	a.ui.Info("%s is running and healthy: hermes-box ssh", m.Name)
	return nil
}
