package chunkstore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/cdc"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// envPlain marks a test binary built without the race detector, run by
// runPlain.
const envPlain = "HB_TEST_STORE_PLAIN"

var plainOnce struct {
	sync.Once
	exe string
	err error
}

// runPlain runs the calling test, one of millions of chunks, in a test
// binary without the race detector (which makes it minutes long) and
// reports true when it did: the caller then returns. Without -race, or
// in that binary, it reports false and the test runs here.
func runPlain(t *testing.T) bool {
	t.Helper()
	if !raceEnabled || os.Getenv(envPlain) != "" {
		return false
	}
	// Each runs in a process of its own, its heap its own: the three run
	// beside each other and beside the package's other parallel tests.
	t.Parallel()
	plainOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hb-chunkstore-plain-")
		if err != nil {
			plainOnce.err = err
			return
		}
		plainOnce.exe = filepath.Join(dir, "chunkstore.test")
		out, err := exec.Command("go", "test", "-c", "-o", plainOnce.exe, ".").CombinedOutput()
		if err != nil {
			plainOnce.err = fmt.Errorf("building the test binary without -race: %w\n%s", err, out)
		}
	})
	if plainOnce.err != nil {
		t.Fatal(plainOnce.err)
	}
	// Removed by TestMain: every test that runs without -race shares it.
	cmd := exec.CommandContext(t.Context(), plainOnce.exe, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envPlain+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("without -race:\n%s", out)
	if err != nil {
		t.Fatalf("%s without -race: %v", t.Name(), err)
	}
	return true
}

// tinyChunk is chunk i of size bytes (at least 4) of a seed: distinct
// for each i below 2^24.
func tinyChunk(seed byte, i, size int) []byte {
	b := make([]byte, size)
	b[0] = seed
	for j := 1; j < 4; j++ {
		b[j] = byte(i >> (8 * (j - 1)))
	}
	return b
}

// boxChunks are the chunks (content and trees) of generation gen's box
// parts as the agent cuts them, and each part's tree.
func boxChunks(t testing.TB, gen int) (chunks map[ID][]byte, order []ID, trees map[string][]ID) {
	t.Helper()
	chunks, trees = map[ID][]byte{}, map[string][]ID{}
	for _, part := range Parts {
		tree, _, err := snaptree.Encode(bytes.NewReader(rawTar(boxParts(gen)[part])), func(id snaptree.ID, data []byte) error {
			if _, ok := chunks[id]; !ok {
				chunks[id] = bytes.Clone(data)
				order = append(order, id)
			}
			return nil
		})
		must(t, err)
		for _, id := range tree {
			trees[part] = append(trees[part], id)
		}
	}
	return chunks, order, trees
}

// encodeTree is a tree of the tar files followed by regular files with
// the given names and chunks (file name → ids, sizes summed from sizes);
// its chunks go to w.
func encodeTree(t testing.TB, w *Writer, files []tfile, known []knownFile) []ID {
	t.Helper()
	enc := snaptree.NewEncoder(func(id snaptree.ID, data []byte) error {
		_, err := w.Put(id, data)
		return err
	})
	tr := tar.NewReader(bytes.NewReader(rawTar(files)))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		must(t, enc.WriteHeader(hdr))
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			_, err := io.Copy(enc, tr)
			must(t, err)
		}
	}
	for _, k := range known {
		must(t, enc.WriteKnown(&tar.Header{Typeflag: tar.TypeReg, Name: k.name, Mode: 0o644, Size: k.size}, k.ids))
	}
	tree, _, err := enc.Close()
	must(t, err)
	out := make([]ID, len(tree))
	for i, id := range tree {
		out[i] = id
	}
	return out
}

type knownFile struct {
	name string
	size int64
	ids  []byte
}

// publishTrees publishes a record of generation gen's meta naming trees,
// as a snapshot would (sealed, then published); it returns its directory.
func publishTrees(t testing.TB, backups string, gen int, trees map[string][]ID) string {
	t.Helper()
	m := meta(gen)
	rec := &Record{Format: RecordFormat, Chunker: cdc.Name, Created: m.Now.UTC().Format(time.RFC3339),
		Machine: m.Machine, Label: m.Label, Smolvm: m.Smolvm, GOOS: m.GOOS, Parts: map[string]PartRecord{},
		Fingerprint: keys.Fingerprint(m.Signer.PublicKey())}
	for part, tree := range trees {
		p := PartRecord{}
		for _, id := range tree {
			p.Tree = append(p.Tree, id.String())
		}
		rec.Parts[part] = p
	}
	data, sig, err := rec.seal(m)
	must(t, err)
	dir, err := publish(backups, m, data, sig)
	must(t, err)
	return dir
}

// TestRecordThatWouldNotLoadIsRefused: a snapshot whose record would be
// over what Load reads (a workspace tree of 16,000 tiny chunks: 1.2 MB of
// record) is refused before the store's commit: no backup directory
// appears, the store is as it was, and the last backup restores.
func TestRecordThatWouldNotLoadIsRefused(t *testing.T) {
	backups := t.TempDir()
	dir0, _ := snapshot(t, backups, 0)
	ws := boxParts(0)[boxlayout.PartWorkspace]
	_, _, wsTree := boxChunks(t, 1) // the tree the agent sends next
	padded := ws
	for i := range 5000 {
		padded = append(padded, tfile{fmt.Sprintf("work/d%05d/", i), nil})
	}
	// The padded tree's bytes, held as 8-byte chunks.
	s := openStore(t, StoreDir(backups, "box"))
	w, err := s.NewWriter()
	must(t, err)
	var treeBytes []byte
	for _, id := range encodeTree(t, w, padded, nil) {
		b, err := s.Read(id, nil)
		if err != nil {
			must(t, w.flush())
			b, err = s.Read(id, nil)
		}
		must(t, err)
		treeBytes = append(treeBytes, b...)
	}
	var tiny []chunkwire.ID
	for len(treeBytes) > 0 {
		n := min(8, len(treeBytes))
		id := Sum(treeBytes[:n])
		_, err := w.Put(id, treeBytes[:n])
		must(t, err)
		tiny, treeBytes = append(tiny, id), treeBytes[n:]
	}
	must(t, w.Commit())
	s.Close()
	if len(tiny) < 15000 { // 74 bytes of record each
		t.Fatalf("the tree is %d chunks, too few for a record over %d bytes", len(tiny), maxRecord)
	}
	before := files(t, StoreDir(backups, "box"))
	mut := agentMutation{End: func(e *chunkwire.End) {
		if slices.Equal(e.Tree, idsOf(wsTree[boxlayout.PartWorkspace])) {
			e.Tree = tiny
		}
	}}
	_, _, _, err = ingestGen(t, backups, 1, mut)
	// The stream's own bound on a part's tree chunks (chunkwire.MaxTree)
	// refuses it first now; seal's check below stands behind it.
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("over the limit of %d", chunkwire.MaxTree)) {
		t.Fatalf("err = %v, want the tree refused as over %d chunks", err, chunkwire.MaxTree)
	}
	t.Logf("a workspace tree of %d chunks: %v", len(tiny), err)
	if entries, _ := os.ReadDir(backups); len(entries) != 2 {
		t.Fatalf("the backups directory holds %v", entries)
	}
	if after := files(t, StoreDir(backups, "box")); !slices.Equal(after, before) {
		t.Fatalf("the store changed:\n%v\nwas\n%v", after, before)
	}
	restored(t, backups, dir0, 0)
	if _, err := Collect(context.Background(), backups, "box", trust); err != nil {
		t.Fatalf("a collection after the refused snapshot: %v", err)
	}
	// A record over what Load reads is refused where it is sealed, before
	// any commit.
	m := meta(1)
	rec := &Record{Format: RecordFormat, Chunker: cdc.Name, Created: m.Now.UTC().Format(time.RFC3339),
		Machine: m.Machine, Label: m.Label, Smolvm: m.Smolvm, GOOS: m.GOOS, Parts: map[string]PartRecord{},
		Fingerprint: keys.Fingerprint(m.Signer.PublicKey())}
	for _, part := range Parts {
		p := PartRecord{}
		for _, id := range tiny {
			p.Tree = append(p.Tree, ID(id).String())
		}
		rec.Parts[part] = p
	}
	if _, _, err := rec.seal(m); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("over the limit of %d", maxRecord)) {
		t.Fatalf("sealing a record of two trees of %d chunks: err = %v, want it refused as over %d bytes", len(tiny), err, maxRecord)
	}
}

func idsOf(tree []ID) []chunkwire.ID {
	out := make([]chunkwire.ID, len(tree))
	for i, id := range tree {
		out[i] = id
	}
	return out
}

// TestGCReadsBackBeforeRemoving damages what a GC wrote before it removes
// anything: the GC fails, the store's files are as they were, every
// chunk is held and reads, and the next GC does the job.
func TestGCReadsBackBeforeRemoving(t *testing.T) {
	tests := []struct {
		name, at string
		damage   func(t *testing.T, path string)
		sub      string
	}{
		{"a repacked pack damaged on disk", "pack-published", func(t *testing.T, p string) { flip(t, p, 100) }, packsDir},
		{"the new index damaged on disk", "new-index-published", func(t *testing.T, p string) { flip(t, p, 50) }, indexDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			a, b := setA(), setB()
			put(t, s, append(append([][]byte{}, a[:6]...), b[:30]...)) // a sparse pack: repacked
			put(t, s, append(append([][]byte{}, b[30:]...), a[6:]...))
			before := files(t, dir)
			crashPoint = func(step string) {
				if step != tt.at {
					return
				}
				for _, f := range files(t, dir) {
					if strings.HasPrefix(f, tt.sub+"/") && !slices.Contains(before, f) && !strings.Contains(f, tmpPrefix) {
						tt.damage(t, filepath.Join(dir, f))
					}
				}
			}
			t.Cleanup(func() { crashPoint = func(string) {} })
			_, err := s.GC(marked(s, a))
			if err == nil || !strings.Contains(err.Error(), "nothing was removed") {
				t.Fatalf("GC of damaged output: err = %v", err)
			}
			crashPoint = func(string) {}
			if after := files(t, dir); !slices.Equal(after, before) {
				t.Fatalf("after a failed GC the store holds\n%v\nwas\n%v", after, before)
			}
			s2 := openStore(t, dir)
			mustRead(t, s2, append(a, b...))
			if _, err := s2.GC(marked(s2, a)); err != nil {
				t.Fatal(err)
			}
			mustRead(t, openStore(t, dir), a)
		})
	}
}

// TestRepairRefusesToDropLiveChunks: the pack of the first backup's
// workspace has its header damaged (its chunks still read through the
// index); repair would leave it out. Without force it names what each
// backup would lack (the first its workspace tree, the second files of
// its workspace) and changes nothing: both still restore. With force it
// rebuilds and says the same.
func TestRepairRefusesToDropLiveChunks(t *testing.T) {
	backups := t.TempDir()
	dir0, _ := snapshot(t, backups, 0)
	dir1, _ := snapshot(t, backups, 1)
	store := StoreDir(backups, "box")
	ws := largest(t, store, packsDir) // the first workspace's: its 4 MiB file
	fi, err := os.Stat(ws)
	must(t, err)
	flip(t, ws, fi.Size()-len64(packMagic)-1) // the entry count's high byte
	dirs, recs, err := Backups(backups, "box", trust)
	must(t, err)
	var kept []Kept
	for i := range dirs {
		kept = append(kept, Kept{Dir: dirs[i], Rec: recs[i]})
	}
	before := files(t, store)
	rep, err := Repair(context.Background(), store, kept, false)
	wantErr(t, err, ErrWouldLose)
	checkLosses := func(rep RepairReport) {
		t.Helper()
		if len(rep.Losses) != 2 || len(rep.Unreadable) != 1 {
			t.Fatalf("report %+v: want two losses and one pack unreadable", rep)
		}
		l0, l1 := rep.Losses[0], rep.Losses[1]
		if l0.Backup != filepath.Base(dir0) || l0.Part != boxlayout.PartWorkspace || !l0.Tree {
			t.Errorf("loss %+v: want the first backup's workspace tree", l0)
		}
		if l1.Backup != filepath.Base(dir1) || l1.Part != boxlayout.PartWorkspace || l1.Tree ||
			!slices.Contains(l1.Files, "hermes-home/config.yaml") || !slices.Contains(l1.Files, "work/big.bin") {
			t.Errorf("loss %+v: want the second backup's config and big file named", l1)
		}
	}
	checkLosses(rep)
	if after := files(t, store); !slices.Equal(after, before) {
		t.Fatalf("a refused repair changed the store:\n%v\nwas\n%v", after, before)
	}
	restored(t, backups, dir0, 0)
	restored(t, backups, dir1, 1)
	rep, err = Repair(context.Background(), store, kept, true)
	must(t, err)
	checkLosses(rep)
	wantErr(t, openStore(t, store).Verify(context.Background(), recs[1], false), ErrMissing)
}

func len64(b []byte) int64 { return int64(len(b)) }
