//go:build linux

package releasematrix_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/chunkwire/chunkwiretest"
	"github.com/hermes-box/hermes-box/shared/termsafe/termsafetest"
)

// streamCaseFile is the test agent's case file of the rootfs part's
// `snapshot chunks` (the workspace's stays the real agent's).
const streamCaseFile = "snapshot.chunks.rootfs"

// TestHostileStreamRelease is issue #36's hostile stream matrix through
// the release build: on one box, after an honest incremental backup, the
// compromised test agent answers the rootfs part's `snapshot chunks` of
// the release `hermes-box snapshot` with each of chunkwiretest's streams
// (one just over each row of host/internal/chunkstore's StreamLimits
// that one snapshot reaches cheaply; chunkstore's TestSharedHostileStreams
// runs the same bytes through Ingest), and each cell checks: the snapshot
// is refused (non-zero exit, the case's reason in its error) or, for a
// stream within the limits, published; nothing in its output a terminal
// would obey; peak RSS within the host's budget; then `backups --verify
// --read-data` of the release build opens the store and verifies every
// backup, the earlier ones with every chunk re-read.
func TestHostileStreamRelease(t *testing.T) {
	requireNSSWrapper(t)
	release := sshdtest.GoBuildRelease(t, filepath.Join(t.TempDir(), "hermes-box"), "./host", "-tags", "hbxrelease", "-trimpath")
	h, _ := releaseBox(t, "plain")
	snap := releaseDriver{args: []string{"snapshot", "matrix"}, env: incrementalSnapshot}
	if r := runRelease(t, h, release, snap); r.code != 0 {
		t.Fatalf("the honest incremental snapshot: exit %d\n%s\n%s", r.code, r.out.Head(), r.err.Head())
	}
	verified := func(t *testing.T) {
		t.Helper()
		r := runRelease(t, h, release, releaseDriver{args: []string{"backups", "--verify", "--read-data"}})
		clean(t, "backups --verify --read-data", r)
		if r.code != 0 {
			t.Errorf("backups --verify --read-data: exit %d, want every backup good\n%s\n%s", r.code, r.out.Head(), r.err.Head())
		}
	}
	verified(t)
	var table strings.Builder
	table.WriteString("\n| stream | limit | exit | peak RSS | seconds | error |\n|---|---|---|---|---|---|\n")
	for _, c := range chunkwiretest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			h.T = t
			file := h.Hostile(streamCaseFile, "stream:"+c.Name)
			r := runRelease(t, h, release, snap)
			met := casesMet(t, file+".hits")
			removeAll(t, file, file+".hits")
			line := errorLine(r.err.Head())
			fmt.Fprintf(&table, "| %s | %s | %d | %.1f MiB | %.1f | %.120s |\n", c.Name, c.Limit, r.code, float64(r.maxRSSKiB)/1024,
				r.elapsed.Seconds(), strings.ReplaceAll(line, "|", "/"))
			if len(met) == 0 {
				t.Fatalf("the snapshot never asked the rootfs's chunks (exit %d)\n%s", r.code, r.err.Head())
			}
			clean(t, "snapshot", r)
			switch {
			case c.Want == "" && r.code != 0:
				t.Errorf("a stream within the limits refused: exit %d\n%s", r.code, r.err.Head())
			case c.Want != "" && r.code == 0:
				t.Errorf("a stream over %s published:\n%s", c.Limit, r.out.Head())
			case c.Want != "" && !strings.Contains(r.err.Head(), c.Want):
				t.Errorf("the refusal does not say %q:\n%s", c.Want, r.err.Head())
			}
			if r.maxRSSKiB == 0 || r.maxRSSKiB > rssBudgetKiB {
				t.Errorf("peak RSS %d KiB, want at most %d", r.maxRSSKiB, rssBudgetKiB)
			}
			verified(t)
		})
	}
	t.Logf("hostile streams through the release hermes-box snapshot:%s", table.String())
}

// clean fails t when the run's output carries what a terminal would obey.
func clean(t *testing.T, what string, r releaseRun) {
	t.Helper()
	for _, o := range []struct {
		name string
		sink *termsafetest.Sink
	}{{"stdout", r.out}, {"stderr", r.err}} {
		if o.sink.Bad() != "" {
			t.Errorf("%s's %s carries %s:\n%.2000q", what, o.name, o.sink.Bad(), o.sink.Head())
		}
	}
}
