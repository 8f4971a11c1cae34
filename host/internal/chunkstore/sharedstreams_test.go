package chunkstore

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/chunkwire/chunkwiretest"
)

// TestSharedHostileStreams runs the streams the compromised test agent
// sends the release hermes-box (chunkwiretest.Cases, which
// host/internal/releasematrix's TestHostileStreamRelease drives) through
// Ingest here: each names a row of StreamLimits and is refused saying
// what its case says, or published when it is within the limits, the
// earlier backups intact.
func TestSharedHostileStreams(t *testing.T) {
	base := t.TempDir()
	var dirs []string
	for gen := range 2 {
		dir, _, err := Ingest(context.Background(), base, meta(gen), chunkAgent(boxParts(gen), agentMutation{}, nil), nil)
		must(t, err)
		dirs = append(dirs, filepath.Base(dir))
	}
	for _, c := range chunkwiretest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Limit != "" && !slices.ContainsFunc(StreamLimits, func(l StreamLimit) bool { return l.Key == c.Limit }) {
				t.Fatalf("case %s is for limit %q, which StreamLimits does not have", c.Name, c.Limit)
			}
			backups := t.TempDir()
			if out, err := exec.Command("cp", "-a", base+"/.", backups).CombinedOutput(); err != nil {
				t.Fatalf("copying the store: %v: %s", err, out)
			}
			honest := chunktest.Agent(map[string][]byte{boxlayout.PartWorkspace: gzipTar(boxParts(2)[boxlayout.PartWorkspace])}, chunktest.Mutation{}, nil)
			src := func(ctx context.Context, part string, in io.Reader, w io.Writer) error {
				if part != boxlayout.PartRootfs {
					return honest(ctx, part, in, w)
				}
				return chunkwiretest.Write(c, in, w)
			}
			_, _, err := Ingest(context.Background(), backups, meta(2), src, nil)
			switch {
			case c.Want == "" && err != nil:
				t.Fatalf("a stream within the limits refused: %v", err)
			case c.Want != "" && (err == nil || !strings.Contains(err.Error(), c.Want)):
				t.Fatalf("err = %v, want one saying %q", err, c.Want)
			}
			intact(t, backups, dirs)
		})
	}
}
