package cli

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/gate"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// gatePatcher plugs the approval gate (guest-agent/internal/gate) into
// provisioning's gated-approval step: the mechanism of the pinned release,
// then Hermes itself asked for its effective mode.
type gatePatcher struct {
	installer gate.Installer
}

func newGatePatcher() *gatePatcher {
	return &gatePatcher{installer: gate.Installer{Integration: true}}
}

// target maps provisioning's guest paths onto the root.
func (g *gatePatcher) target(t provision.GateTarget) gate.Target {
	at := func(p string) string { return filepath.Join(t.Root, filepath.FromSlash(p)) }
	return gate.Target{Source: at(t.Source), Python: at(t.Python), Home: filepath.Dir(at(t.Config)),
		Managed: at(boxlayout.HermesManagedDir), WorkDir: at(boxlayout.WorkDir), Commit: t.Commit, User: t.User, Runner: t.Runner,
		Verdicts: gate.NewVerdictCache(at(boxlayout.GateVerdictCache), at(boxlayout.GateAnchorsCache))}
}

// Pending reports what Apply would change.
func (g *gatePatcher) Pending(ctx context.Context, t provision.GateTarget) ([]string, error) {
	return g.installer.Pending(ctx, g.target(t))
}

// Check is the gate's health check on the target, as the health verb runs
// it; it keeps the verdict in the box's verdict cache.
func (g *gatePatcher) Check(ctx context.Context, t provision.GateTarget) error {
	if c, _ := gate.Health(ctx, g.target(t), time.Now().UTC()); c.Status != health.StatusHealthy {
		return errors.New(c.Message)
	}
	return nil
}

// Apply puts the gate in and fails unless Hermes then resolves it as intended.
func (g *gatePatcher) Apply(ctx context.Context, t provision.GateTarget) error {
	return g.installer.Apply(ctx, g.target(t))
}
