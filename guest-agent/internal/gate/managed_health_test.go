package gate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// TestHealthNeedsRootsManagedScope: the check is red when the managed
// config does not parse (Hermes would ignore every pin in it, with a
// warning), lacks a pin, when Hermes reads another managed directory, or
// would import a memory provider from outside its tree; each message names
// the file or the path.
func TestHealthNeedsRootsManagedScope(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, tgt Target, run *fakeRunner)
		want  string
	}{
		{"config does not parse", func(t *testing.T, tgt Target, _ *fakeRunner) {
			write(t, tgt.Managed, "config.yaml", "approvals:\n  mode: smart\n bad: [\n")
		}, "config.yaml does not parse, so Hermes ignores every pin in it"},
		{"a pin is missing", func(t *testing.T, tgt Target, _ *fakeRunner) {
			cfg := read(t, tgt.Managed, "config.yaml")
			write(t, tgt.Managed, "config.yaml", strings.Replace(cfg, "provider: \"\"", "other: \"\"", 1))
		}, "does not pin memory.provider"},
		{"a pin has another value", func(t *testing.T, tgt Target, _ *fakeRunner) {
			cfg := read(t, tgt.Managed, "config.yaml")
			write(t, tgt.Managed, "config.yaml", strings.Replace(cfg, "engine: compressor", "engine: agents", 1))
		}, "does not pin context.engine at compressor"},
		{"another managed directory", func(t *testing.T, tgt Target, run *fakeRunner) {
			e := intended(pins.GateSmartPlugin)
			e.ManagedDir = filepath.Join(tgt.Home, "policy")
			run.probe = answer(t, e)
		}, "Hermes reads its managed scope from"},
		{"memory provider outside the tree", func(t *testing.T, tgt Target, run *fakeRunner) {
			e := intended(pins.GateSmartPlugin)
			e.MemoryProvider, e.MemoryProviderPath = "agentmem", tgt.Home
			run.probe = answer(t, e)
		}, `would import the memory provider "agentmem"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &fakeRunner{probe: answer(t, intended(pins.GateSmartPlugin))}
			tgt := fixtureTarget(t, "0.19.0", run)
			ctx := context.Background()
			if err := (Installer{}).Apply(ctx, tgt); err != nil {
				t.Fatal(err)
			}
			if c, _ := Health(ctx, tgt, time.Now()); c.Status != health.StatusHealthy {
				t.Fatalf("before: %+v", c)
			}
			tt.spoil(t, tgt, run)
			c, _ := Health(ctx, tgt, time.Now())
			if c.Status != health.StatusUnhealthy || !strings.Contains(c.Message, tt.want) {
				t.Fatalf("want unhealthy with %q: %+v", tt.want, c)
			}
		})
	}
}
