package chunkstore

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// ErrStream is a chunk stream past one of StreamLimits: the box's doing,
// refused whole, nothing of it kept.
var ErrStream = errors.New("the box's chunk stream is refused")

// StreamLimit is one bound of what a box may send in a snapshot's chunk
// stream (`snapshot chunks PART`), declared once, in StreamLimits: the
// table of the stream in docs/limits.md is this one, and the hostile stream
// matrix (matrix_test.go) runs one case just over each and one flood of
// it through Ingest.
type StreamLimit struct {
	// Key names the limit to the matrix.
	Key string
	// What is bounded, as docs/limits.md says it.
	What string
	// Value is the bound, in Unit; Rule, when set, is how it is derived
	// (the value then being the one of the default backup.Limits).
	Value int64
	Unit  string
	Rule  string
	// Checked says when the host checks it, while the stream runs.
	Checked string
}

// The stream's own bounds; the rest are snaptree's and chunkwire's.
const (
	// maxTreeRepeat is the most times a part's tree may name one tree
	// chunk: an honest tree repeats one only in a file's long run of one
	// chunk (a 256 GiB file of zeros names one 1 MiB tree chunk 7
	// times), and each naming costs the host the chunk's decoding again.
	maxTreeRepeat = 64
	// maxTreeText and treeTextRatio bound the names and PAX records a
	// part's tree may carry (the bytes decoding costs most for, 40 to 80
	// ns each): maxTreeText, plus treeTextRatio times the bytes of its
	// tree chunks as stored (as the box sent them, zstd or plain). An
	// honest tree of a million entries carries about 100 MB of them in
	// some 10 MB stored; a box's 1 MiB tree chunk of PAX compresses to
	// tens of bytes.
	maxTreeText   = 64 << 20
	treeTextRatio = 64
	// storeChunks is the most chunks a machine's store may hold after a
	// snapshot. The host keeps the store's index in memory, 52 bytes a
	// chunk (index.go's entry; a refused snapshot reads it again into
	// the same array): 1,000,000 chunks are 50 MiB, which with a
	// snapshot's window stays within the host's 128 MiB heap
	// (TestStoreCapHeap: 83 MiB publishing up to the cap, 80 MiB
	// refusing past it, 111 MiB before the reload read in place).
	// Retention keeps what every backup names, and a box may
	// push a million tiny chunks a snapshot (a file's last chunk each),
	// so without it a few snapshots would pass that bound. Honest stores
	// are far from it: the 2 GB benchmark box holds about 101,000 chunks.
	storeChunks = 1_000_000
)

// maxStoreChunks is storeChunks, lowered by tests.
var maxStoreChunks int64 = storeChunks

// StreamLimits are the bounds of the chunk stream, each checked as the
// stream runs, in memory bounded by the table itself.
var StreamLimits = []StreamLimit{
	{Key: "chunk-bytes", What: "a chunk, plain or as sent", Value: chunkwire.MaxChunk, Unit: "bytes",
		Checked: "as its frame is read, before its bytes; decompression stops there"},
	{Key: "chunk-min", What: "a file's or a tree's chunk but its last, at least", Value: snaptree.MinChunk, Unit: "bytes",
		Checked: "as the tree is read (a file's), at the end frame (the tree's)"},
	{Key: "chunk-empty", What: "empty chunks in a file", Value: 0, Unit: "chunks",
		Checked: "as the tree is read"},
	{Key: "file-ids", What: "a file's chunk ids", Unit: "ids", Rule: "size / 64 KiB + 1",
		Checked: "as its record is read, before its ids"},
	{Key: "tree-chunks", What: "a part's tree chunks", Value: chunkwire.MaxTree, Unit: "chunks",
		Checked: "as the end frame is read"},
	{Key: "tree-repeat", What: "times a part's tree names one tree chunk", Value: maxTreeRepeat, Unit: "times",
		Checked: "at the end frame, before the tree is read"},
	{Key: "record-bytes", What: "tree bytes per entry (its record; a file's ids add 32 bytes each)", Value: snaptree.MaxRecord, Unit: "bytes",
		Checked: "as the record's length is read"},
	{Key: "tree-text", What: "names and PAX records of a part's tree", Value: maxTreeText, Unit: "bytes",
		Rule: "64 MiB + 64 × its tree chunks' bytes as sent", Checked: "as the tree is read"},
	{Key: "pax-records", What: "PAX records per entry", Value: snaptree.MaxPAXRecords, Unit: "records",
		Checked: "as the record is read"},
	{Key: "pax-bytes", What: "PAX keys and values per entry", Value: snaptree.MaxPAXBytes, Unit: "bytes",
		Checked: "as the record is read"},
	{Key: "small-chunks", What: "new chunks under 64 KiB a part may bring", Value: smallChunks(backup.Limits{}), Unit: "chunks",
		Rule: "entries + tree chunks", Checked: "as each chunk is added"},
	{Key: "part-chunks", What: "new chunks a part may bring", Value: partChunks(backup.Limits{}), Unit: "chunks",
		Rule: "entries + unpacked bytes / 64 KiB + tree chunks; each one its tree names, or nothing is kept", Checked: "as each chunk is added; named, once the tree is read"},
	{Key: "store-chunks", What: "chunks the machine's store holds after a snapshot (its index: 52 bytes of host heap each)", Value: storeChunks, Unit: "chunks",
		Checked: "as each new chunk is added, the store's chunks and the snapshot's counted; refused, the snapshot keeps nothing"},
	{Key: "names", What: "control characters in an entry's name or link", Value: 0, Unit: "characters",
		Checked: "as the tree is read"},
	{Key: "record", What: "a backup's record (snapshot.json), the largest that loads", Value: maxRecord, Unit: "bytes",
		Checked: "before it is published"},
}

// smallChunks is the most new chunks under snaptree.MinChunk a part may
// bring within lim: a file's last chunk each, and the tree's last.
func smallChunks(lim backup.Limits) int64 {
	return int64(lim.WithDefaults().MaxEntries) + chunkwire.MaxTree
}

// partChunks is the most new chunks a part may bring within lim: every
// chunk but a file's last or the tree's is snaptree.MinChunk or more.
func partChunks(lim backup.Limits) int64 {
	l := lim.WithDefaults()
	return smallChunks(lim) + l.MaxUnpacked/snaptree.MinChunk
}

// Shown is the limit as docs/limits.md's table shows it.
func (l StreamLimit) Shown() string {
	v := fmt.Sprintf("%d %s", l.Value, l.Unit)
	if l.Unit == "bytes" && l.Value >= 1024 {
		v = bounded.Human(l.Value)
	}
	switch {
	case l.Rule != "" && l.Value > 0:
		v = l.Rule + " (" + v + " by default)"
	case l.Rule != "":
		v = l.Rule
	}
	return v
}

// checkStoreChunks refuses a snapshot that would leave the store s
// holding more than maxStoreChunks chunks (its own new ones counted, as
// the writer adds them to the index). The store is full whoever filled
// it: the error names the cap and how to free chunks.
func checkStoreChunks(s *Store) error {
	if n := int64(s.Len()); n > maxStoreChunks {
		return fmt.Errorf("%w: the machine's chunk store would hold more than %d chunks, the most whose index fits the host's memory "+
			"(this snapshot is not kept; the earlier backups are as they were): delete old backups with `hermes-box backups delete NAME` "+
			"or `hermes-box backups prune --keep-last N`, which frees the chunks only they name, then snapshot again",
			backup.ErrLimit, maxStoreChunks)
	}
	return nil
}

// checkTreeChunks checks a part's tree chunks, as the end frame names
// them: each held, every one but the last snaptree.MinChunk bytes or
// more, none named more than maxTreeRepeat times.
func (s *Store) checkTreeChunks(tree []chunkwire.ID) error {
	times := make(map[chunkwire.ID]int, len(tree))
	for i, id := range tree {
		n, ok := s.RawSize(ID(id))
		if !ok {
			return fmt.Errorf("%w: tree chunk %s is neither held nor sent", ErrStream, ID(id))
		}
		if n < snaptree.MinChunk && i < len(tree)-1 {
			return fmt.Errorf("%w: tree chunk %d of %d has %d bytes, short of the %d every one but the last has", ErrStream, i, len(tree), n, snaptree.MinChunk)
		}
		if times[id]++; times[id] > maxTreeRepeat {
			return fmt.Errorf("%w: the tree names chunk %s more than %d times", ErrStream, ID(id), maxTreeRepeat)
		}
	}
	return nil
}

// textNames refuses an entry whose name or link target holds a control
// character (an escape sequence shown raw would drive the terminal of
// whoever lists the backup); the error shows it escaped.
func textNames(hdr *tar.Header) error {
	for _, s := range []string{hdr.Name, hdr.Linkname} {
		if strings.ContainsFunc(s, unicode.IsControl) {
			return fmt.Errorf("%w: entry %s: a control character in its name or link target", ErrStream, termsafe.String(hdr.Name))
		}
	}
	return nil
}

// freshChunks are the chunks a part added, by the first 16 bytes of
// their ids (a collision takes 2^64 work and keeps one chunk the tree
// does not name), and which of them the tree named.
type freshChunks struct {
	keys  [][16]byte
	named []uint64 // a bit per key, once sorted
}

func (f *freshChunks) add(id ID) { f.keys = append(f.keys, [16]byte(id[:16])) }

// sort readies f for name.
func (f *freshChunks) sort() {
	slices.SortFunc(f.keys, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	f.named = make([]uint64, (len(f.keys)+63)/64)
}

// name marks id named, if the part added it.
func (f *freshChunks) name(id ID) {
	k := [16]byte(id[:16])
	if i, ok := slices.BinarySearchFunc(f.keys, k, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }); ok {
		f.named[i/64] |= 1 << (i % 64)
	}
}

// allNamed refuses a part that added a chunk its tree does not name.
func (f *freshChunks) allNamed() error {
	n, first := 0, -1
	for i := range f.keys {
		if f.named[i/64]&(1<<(i%64)) == 0 {
			if n++; first < 0 {
				first = i
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%w: %d chunks sent that the tree does not name (the first %x…)", ErrStream, n, f.keys[first])
	}
	return nil
}

// treeText counts the names and PAX records of a tree's entries against
// their budget (maxTreeText, treeTextRatio).
type treeText struct {
	n, budget int64
}

// treeTextBudget is the budget of the tree of chunks tree, each named
// chunk's stored bytes counted each time it is named.
func (s *Store) treeTextBudget(tree []chunkwire.ID) *treeText {
	t := &treeText{budget: maxTreeText}
	for _, id := range tree {
		if l, ok := s.idx.find(ID(id)); ok {
			t.budget += treeTextRatio * int64(l.slen)
		}
	}
	return t
}

// add counts hdr's names and PAX records.
func (t *treeText) add(hdr *tar.Header) error {
	if t == nil {
		return nil
	}
	t.n += int64(len(hdr.Name) + len(hdr.Linkname) + len(hdr.Uname) + len(hdr.Gname))
	for k, v := range hdr.PAXRecords {
		t.n += int64(len(k) + len(v))
	}
	if t.n > t.budget {
		return fmt.Errorf("%w: entry %s: the tree's names and PAX records pass %d bytes, over the limit of %d (64 MiB and 64 times its chunks' bytes as sent)",
			ErrStream, termsafe.String(hdr.Name), t.n, t.budget)
	}
	return nil
}
