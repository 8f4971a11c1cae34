package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
)

// gatePatcher plugs the gated-approval patch and the config seeding into
// provisioning's gated-approval step.
type gatePatcher struct {
	patcher *patch.Patcher
}

func newGatePatcher() *gatePatcher {
	return &gatePatcher{patcher: &patch.Patcher{Integration: true}}
}

func (g *gatePatcher) paths(t provision.GateTarget) (src, config string) {
	return filepath.Join(t.Root, filepath.FromSlash(t.Source)), filepath.Join(t.Root, filepath.FromSlash(t.Config))
}

// Pending reports what Apply would change. A tree that carries the marker is
// verified (which writes nothing); a failed verification is an error, never
// a silent re-patch.
func (g *gatePatcher) Pending(ctx context.Context, t provision.GateTarget) ([]string, error) {
	src, config := g.paths(t)
	var pending []string
	if _, err := os.Stat(filepath.Join(src, patch.MarkerFile)); errors.Is(err, fs.ErrNotExist) {
		pending = append(pending, "patch "+t.Source+" with gated approval")
	} else if err != nil {
		return nil, fmt.Errorf("checking the gated-approval marker: %w", err)
	} else if _, err := g.with(t).Patch(ctx, src, t.Commit); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(config)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", config, err)
	}
	seeded, err := hermesconfig.Seed(config, data)
	if err != nil {
		return nil, err
	}
	if string(seeded) != string(data) {
		pending = append(pending, "seed "+t.Config+" with approvals.mode gated")
	}
	return pending, nil
}

// Apply patches the tree, records its commit (so it can be re-verified once
// cleanup has removed .git), then seeds Hermes' config.
func (g *gatePatcher) Apply(ctx context.Context, t provision.GateTarget) error {
	src, config := g.paths(t)
	if _, err := g.with(t).Patch(ctx, src, t.Commit); err != nil {
		return err
	}
	if err := patch.WriteSourceMarker(src, t.Commit); err != nil {
		return err
	}
	_, err := hermesconfig.SeedFile(config)
	return err
}

// with returns the patcher using the target's Python.
func (g *gatePatcher) with(t provision.GateTarget) *patch.Patcher {
	p := *g.patcher
	if t.Python != "" {
		p.Python = filepath.Join(t.Root, filepath.FromSlash(t.Python))
	}
	return &p
}
