package chunkstore

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
)

// heldSeen is a ChunkSource that records the held list each part's
// stream was given, then runs src.
func heldSeen(src ChunkSource, seen map[string]*chunkwire.Held) ChunkSource {
	return func(ctx context.Context, part string, in io.Reader, w io.Writer) error {
		data, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		if seen[part], err = chunkwire.ReadHeld(bytes.NewReader(data)); err != nil {
			return err
		}
		return src(ctx, part, bytes.NewReader(data), w)
	}
}

// TestHeldListNamesOnlyTheBoxsOwn (issue #36 case 7): after destroy and
// init under the same name (a new box identity), the held list and the
// committed token tell the new box nothing of the old box's backups, so
// it cannot confirm guessed content of them; from its own first backup
// on, the list names its own chunks (and the unchanged box keeps its
// deduplication).
func TestHeldListNamesOnlyTheBoxsOwn(t *testing.T) {
	backups := t.TempDir()
	ingest := func(n, gen int, box string) (map[string]*chunkwire.Held, *Record, int) {
		t.Helper()
		seen := map[string]*chunkwire.Held{}
		var sent int
		m := meta(n)
		m.Box = box
		_, rec, err := Ingest(context.Background(), backups, m, heldSeen(chunkAgent(boxParts(gen), agentMutation{}, &sent), seen), nil)
		must(t, err)
		return seen, rec, sent
	}
	// The old box's secret: a rootfs file only its backup holds.
	secret := Sum(chunk("lib-gen0", 0, 30<<10, false))
	_, _, sent0 := ingest(0, 0, "SHA256:old")
	seen, _, sent1 := ingest(1, 1, "SHA256:old")
	if !seen[boxlayout.PartRootfs].Has(secret) || seen[boxlayout.PartRootfs].Committed == (chunkwire.ID{}) || sent1*3 > sent0 {
		t.Fatalf("the same box: the held list does not name its own last backup's chunks (sent %d, then %d)", sent0, sent1)
	}
	seen, _, _ = ingest(2, 2, "SHA256:new")
	for part, h := range seen {
		if len(h.Prefixes) != 0 || h.Committed != (chunkwire.ID{}) {
			t.Fatalf("a new box's first snapshot: %s's held list names %d chunks (token %x) of the old box's backups", part, len(h.Prefixes), h.Committed)
		}
	}
	seen, _, sent3 := ingest(3, 2, "SHA256:new")
	if h := seen[boxlayout.PartRootfs]; h.Has(secret) || len(h.Prefixes) == 0 || h.Committed == (chunkwire.ID{}) || sent3*3 > sent0 {
		t.Fatalf("the new box's second snapshot: the list names the old box's secret %v, %d chunks, token %x (sent %d)", h.Has(secret), len(h.Prefixes), h.Committed, sent3)
	}
}

// TestHeldListAfterRestore: a box restored from one of the machine's
// backups (its host key that backup's box's, a new box identity here)
// holds exactly that backup's content: its next snapshot is told of
// that backup's chunks and token, and of no other backup's (the newer
// box's secret), so it sends almost nothing; a restore from elsewhere
// tells it nothing.
func TestHeldListAfterRestore(t *testing.T) {
	backups := t.TempDir()
	ingest := func(n, gen int, box string) (map[string]*chunkwire.Held, string, int) {
		t.Helper()
		seen := map[string]*chunkwire.Held{}
		var sent int
		m := meta(n)
		m.Box = box
		dir, _, err := Ingest(context.Background(), backups, m, heldSeen(chunkAgent(boxParts(gen), agentMutation{}, &sent), seen), nil)
		must(t, err)
		return seen, dir, sent
	}
	_, dirA, sent0 := ingest(0, 0, "SHA256:old")
	ingest(1, 1, "SHA256:new") // a newer box under the same name
	secret := Sum(chunk("lib-gen1", 0, 30<<10, false))
	must(t, NoteRestored(backups, "box", "SHA256:old", dirA, meta(1).Now.Add(30*time.Second)))
	seen, _, sent := ingest(2, 0, "SHA256:old")
	if h := seen[boxlayout.PartRootfs]; len(h.Prefixes) == 0 || h.Has(secret) || h.Committed == (chunkwire.ID{}) || sent*10 > sent0 {
		t.Fatalf("after a restore of the box's backup: the list names %d chunks, the newer box's secret %v, token %x; sent %d of %d",
			len(h.Prefixes), h.Has(secret), h.Committed, sent, sent0)
	}
	must(t, NoteRestored(backups, "box", "SHA256:pkg", filepath.Join(t.TempDir(), filepath.Base(dirA)), meta(2).Now.Add(30*time.Second)))
	seen, _, _ = ingest(3, 0, "SHA256:pkg")
	for part, h := range seen {
		if len(h.Prefixes) != 0 || h.Committed != (chunkwire.ID{}) {
			t.Fatalf("after a restore from outside the backups: %s's list names %d chunks (token %x)", part, len(h.Prefixes), h.Committed)
		}
	}
}
