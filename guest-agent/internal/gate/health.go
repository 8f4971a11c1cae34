package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Health is the "gate" check: the gate is installed and active as
// provisioned. The release comes from the commit the gate step recorded in
// the tree; the tree's gate marker is verified; Hermes itself is asked for
// its effective mode (or the verdict it gave for the same inputs, from
// t.Verdicts). A tree the gate step never touched (no commit record,
// as with the test-only stand-in Hermes) gives an info check, which does
// not change the report's verdict; anything else that is wrong is critical.
func Health(ctx context.Context, t Target, now time.Time) (health.Check, *health.Gate) {
	c := health.Check{Status: health.StatusUnhealthy, Severity: health.SeverityCritical, Since: now}
	commit, err := patch.TreeCommit(t.Source)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(t.Source, patch.SourceMarker)); errors.Is(statErr, fs.ErrNotExist) {
			c.Status, c.Severity = health.StatusDegraded, health.SeverityInfo
			c.Message = "no approval gate was provisioned in this Hermes tree (" + t.Source + ")"
			return c, nil
		}
		c.Message = "approval gate: " + err.Error()
		return c, nil
	}
	rel, err := pins.Hermes(commit)
	if err != nil {
		c.Message = "approval gate: " + err.Error()
		return c, nil
	}
	g := &health.Gate{HermesVersion: rel.Version, Mechanism: string(rel.Mechanism), IntendedMode: rel.Mechanism.IntendedMode()}
	// Each input is hashed once: the verdict's key takes the digests of
	// the files the anchors' verification read.
	seen := newInputs()
	g.Problems = append(g.Problems, markerProblems(ctx, t, commit, seen)...)
	t.Commit = commit
	if eff, err := probeCached(ctx, t, rel, seen); err != nil {
		g.Problems = append(g.Problems, err.Error())
	} else {
		g.EffectiveMode = eff.Mode
		g.Problems = append(g.Problems, Verify(rel, eff)...)
		g.Problems = append(g.Problems, managedHealth(t, rel, eff)...)
	}
	if len(g.Problems) > 0 {
		c.Message = fmt.Sprintf("approval gate of Hermes %s (%s) is not as provisioned: %s", rel.Version, rel.Mechanism, strings.Join(g.Problems, "; "))
		return c, g
	}
	c.Status = health.StatusHealthy
	c.Message = fmt.Sprintf("approval gate of Hermes %s (%s) active: approvals.mode %s as Hermes resolves it", rel.Version, rel.Mechanism, g.EffectiveMode)
	return c, g
}
