package cli

import (
	"context"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/gate"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
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
		Managed: at(boxlayout.HermesManagedDir), Commit: t.Commit, User: t.User, Runner: t.Runner}
}

// Pending reports what Apply would change.
func (g *gatePatcher) Pending(ctx context.Context, t provision.GateTarget) ([]string, error) {
	return g.installer.Pending(ctx, g.target(t))
}

// Apply puts the gate in and fails unless Hermes then resolves it as intended.
func (g *gatePatcher) Apply(ctx context.Context, t provision.GateTarget) error {
	return g.installer.Apply(ctx, g.target(t))
}
