package chunkstore

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// corruptFileChunk flips a byte in the blob of one file chunk of rec
// (one of at least snaptree.MinChunk bytes) in its pack and returns the
// chunk.
func corruptFileChunk(t *testing.T, backups string, rec *Record) ID {
	t.Helper()
	s := openStore(t, StoreDir(backups, rec.Machine))
	var bad ID
	found := false
	must(t, s.chunks(context.Background(), rec, func(id snaptree.ID) (int64, error) {
		n, _ := s.RawSize(ID(id))
		if !found && n >= snaptree.MinChunk {
			bad, found = ID(id), true
		}
		return n, nil
	}))
	if !found {
		t.Fatal("no file chunk to corrupt")
	}
	l, _ := s.idx.find(bad)
	path := s.packPath(s.idx.packs[l.pack])
	must(t, os.Chmod(path, 0o600))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	at := int64(l.off) + int64(l.slen)/2
	_, err = f.ReadAt(b, at)
	must(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, at)
	must(t, err)
	return bad
}

// verifyFresh verifies rec from a store opened to read, as `backups
// --verify` does.
func verifyFresh(t *testing.T, backups string, rec *Record) error {
	t.Helper()
	s, err := OpenReader(StoreDir(backups, rec.Machine))
	must(t, err)
	defer s.Close()
	return s.Verify(context.Background(), rec, false)
}

// TestCorruptChunkIsSetAsideAndHealed: a byte flipped in a pack is found
// by Verify's sample (a small store: every chunk), the chunk is set aside
// (the held list leaves it out, Has is false, repair counts it set aside
// and does not refuse), the next Ingest of the same box stores the box's
// copy anew, and then the backup verifies, reads whole and restores,
// before and after GC.
func TestCorruptChunkIsSetAsideAndHealed(t *testing.T) {
	ctx := context.Background()
	backups := t.TempDir()
	dir0, rec0 := snapshot(t, backups, 0)
	bad := corruptFileChunk(t, backups, rec0)

	err := verifyFresh(t, backups, rec0)
	if !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a backup with a corrupt chunk: %v, want ErrDamaged and ErrCorrupt", err)
	}
	// Set aside: every later verification says so, without reading it.
	if err := verifyFresh(t, backups, rec0); !errors.Is(err, ErrDamaged) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify after the chunk was set aside: %v, want ErrDamaged only", err)
	}
	s := openStore(t, StoreDir(backups, "box"))
	if s.Has(bad) {
		t.Fatal("the store still holds the chunk set aside: the next snapshot would dedup onto it")
	}
	held, err := s.heldPrefixes(ctx, rec0)
	must(t, err)
	if _, ok := slices.BinarySearch(held, chunkwire.Prefix(bad)); ok || len(held) == 0 {
		t.Fatalf("the held list (%d prefixes) names the chunk set aside, or nothing", len(held))
	}
	s.Close()

	rep, err := Repair(ctx, StoreDir(backups, "box"), []Kept{{dir0, rec0}}, false)
	if err != nil || len(rep.Losses) != 1 || rep.Losses[0].SetAside != 1 || rep.Losses[0].lost() {
		t.Fatalf("repair with a chunk set aside: %v, %+v", err, rep.Losses)
	}
	if err := verifyFresh(t, backups, rec0); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Verify after repair: %v, want the chunk still set aside", err)
	}

	// The box still has the content: the next snapshot sends the chunk.
	m := meta(0)
	m.Label, m.Now = "heal", m.Now.Add(time.Hour)
	var sent int
	_, rec1, err := Ingest(ctx, backups, m, chunkAgent(boxParts(0), agentMutation{}, &sent), nil)
	must(t, err)
	if sent == 0 || rec1.Added.Chunks == 0 {
		t.Fatalf("the healing snapshot sent %d chunks, added %d", sent, rec1.Added.Chunks)
	}
	for _, r := range []*Record{rec0, rec1} {
		if err := verifyFresh(t, backups, r); err != nil {
			t.Fatalf("Verify of %s after the heal: %v", r.Label, err)
		}
	}
	restored(t, backups, dir0, 0)

	// GC keeps the good copy (the bad one is garbage), and a repair
	// afterwards still finds the good one.
	_, err = Collect(ctx, backups, "box", trust)
	must(t, err)
	_, err = Repair(ctx, StoreDir(backups, "box"), []Kept{{dir0, rec0}}, false)
	must(t, err)
	s2, err := OpenReader(StoreDir(backups, "box"))
	must(t, err)
	defer s2.Close()
	if err := s2.Verify(ctx, rec0, true); err != nil {
		t.Fatalf("--read-data after GC and repair: %v", err)
	}
	restored(t, backups, dir0, 0)
}

// flipChunk flips a byte in the middle of chunk id's blob in its pack.
func flipChunk(t *testing.T, s *Store, id ID) {
	t.Helper()
	l, ok := s.idx.find(id)
	if !ok {
		t.Fatalf("chunk %s not held", id)
	}
	path := s.packPath(s.idx.packs[l.pack])
	data, err := os.ReadFile(path)
	must(t, err)
	data[int64(l.off)+int64(l.slen)/2] ^= 0xff
	must(t, os.Chmod(path, 0o600))
	must(t, os.WriteFile(path, data, 0o600))
}

// TestGCSetsAsideACorruptChunkItRepacks: GC repacking a live chunk that
// no longer re-hashes sets it aside and fails, removing nothing (the
// packs as they were); once the chunk is written again, GC keeps that
// copy and every live chunk reads.
func TestGCSetsAsideACorruptChunkItRepacks(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a, b := setA(), setB()
	put(t, s, append(append([][]byte{}, a[:6]...), b[:30]...))
	put(t, s, b[30:])
	put(t, s, a[6:])
	flipChunk(t, s, Sum(a[0]))
	before, err := s.listIDs(packsDir, packExt)
	must(t, err)
	if _, err := s.GC(marked(s, a)); !errors.Is(err, ErrDamaged) {
		t.Fatalf("GC repacking a corrupt chunk: %v, want ErrDamaged", err)
	}
	after, err := s.listIDs(packsDir, packExt)
	must(t, err)
	slices.SortFunc(before, func(x, y ID) int { return cmpIDs(&x, &y) })
	slices.SortFunc(after, func(x, y ID) int { return cmpIDs(&x, &y) })
	if !slices.Equal(before, after) {
		t.Fatalf("the failed GC changed the packs: %d before, %d after", len(before), len(after))
	}
	s2 := openStore(t, dir)
	if s2.Has(Sum(a[0])) || held(s2, b) != len(b) {
		t.Fatalf("after the failed GC: the corrupt chunk held %v, %d of %d dead chunks held", s2.Has(Sum(a[0])), held(s2, b), len(b))
	}
	mustRead(t, s2, a[1:])
	put(t, s2, a[:1]) // the next snapshot brings it again
	if _, err := s2.GC(marked(s2, a)); err != nil {
		t.Fatalf("GC after the chunk came again: %v", err)
	}
	mustRead(t, openStore(t, dir), a)
}
