package chunkstore

import (
	"archive/tar"
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// TestTarTreesStillCheckVerifyAndStage: a backup whose trees are in the
// tar form that came before the compact one (what the store holds from
// earlier releases, and what an older agent still sends) is checked as
// its compact twin is (the same entries, bytes and names), verifies with
// every chunk read, and stages to the same parts.
func TestTarTreesStillCheckVerifyAndStage(t *testing.T) {
	ctx := context.Background()
	backups := t.TempDir()
	_, rec := snapshot(t, backups, 0)
	s := openStore(t, StoreDir(backups, "box"))
	old := *rec
	old.Parts = map[string]PartRecord{}
	w, err := s.NewWriter()
	must(t, err)
	for part, p := range rec.Parts {
		ids, err := p.treeIDs()
		must(t, err)
		np := p
		np.Tree = nil
		for c := range slices.Chunk(tarTree(t, s, ids), 64<<10) {
			_, err := w.Put(Sum(c), c)
			must(t, err)
			np.Tree = append(np.Tree, Sum(c).String())
		}
		old.Parts[part] = np
	}
	must(t, w.Commit())
	for part := range rec.Parts {
		want, wantNames, err := s.checkTree(ctx, wireIDs(t, rec.Parts[part]), testLimits, treeChecks{})
		must(t, err)
		got, names, err := s.checkTree(ctx, wireIDs(t, old.Parts[part]), testLimits, treeChecks{})
		must(t, err)
		if got.Entries != want.Entries || got.Bytes != want.Bytes || !slices.Equal(names, wantNames) {
			t.Fatalf("%s: the tar tree checks as %d entries, %d bytes, %q; the compact one as %d, %d, %q",
				part, got.Entries, got.Bytes, names, want.Entries, want.Bytes, wantNames)
		}
	}
	must(t, s.Verify(ctx, &old, true))
	stagesAs(t, s, &old, 0)
}

func wireIDs(t *testing.T, p PartRecord) []chunkwire.ID {
	ids, err := p.treeIDs()
	must(t, err)
	out := make([]chunkwire.ID, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// tarTree writes the tree of chunks ids again in the tar form: each entry
// its header, a regular file's size in snaptree.SizeRecord and its chunk
// ids as its body.
func tarTree(t *testing.T, s *Store, ids []ID) []byte {
	t.Helper()
	tree := make([]snaptree.ID, len(ids))
	for i, id := range ids {
		tree[i] = id
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := snaptree.Entries(s.treeReader(context.Background(), tree), func(e snaptree.Entry) error {
		h := *e.Header
		var body []byte
		if h.Typeflag == tar.TypeReg {
			err := e.Chunks(func(id snaptree.ID) (int64, error) {
				body = append(body, id[:]...)
				n, _ := s.RawSize(id)
				return n, nil
			}, nil)
			if err != nil {
				return err
			}
			h.PAXRecords = maps.Clone(h.PAXRecords)
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords[snaptree.SizeRecord] = strconv.FormatInt(h.Size, 10)
			h.Size, h.Format = int64(len(body)), tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	})
	must(t, err)
	must(t, tw.Close())
	return b.Bytes()
}
