package chunkstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunktest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/cdc"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/chunkwire/chunkwiretest"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// matrixLimits are the matrix's part limits: small, so that a case just
// over a bound derived from them (smallChunks, partChunks) is a few MB.
var matrixLimits = backup.Limits{MaxPart: 32 << 20, MaxEntries: 1000,
	FreeSpace: func(string) (int64, error) { return 1 << 50, nil }}

// streamCase is one hostile rootfs stream of the matrix; the workspace
// is the honest box's. want is what the refusal says; "" is a stream
// within the limits, which is published.
type streamCase struct {
	name string
	box  func(b *hostileBox) error
	want string
}

// limitCases are each StreamLimits row's cases: just over the limit,
// and a flood of it (the violation at volume, or the limit reached as
// often as the other limits allow).
var limitCases = map[string][]streamCase{
	"chunk-bytes": {
		shared("chunk-over", "one chunk of 1 MiB + 1"),
		{"10,000 such chunks", func(b *hostileBox) error { return oversized(b, 10_000) }, "over the limit of 1048576"},
	},
	"chunk-min": {
		shared("chunk-short", "a file's first chunk 1 byte short"),
		{"a tree cut into 256-byte chunks", func(b *hostileBox) error {
			b.Every = 256
			for i := range 2000 {
				b.Entry('5', fmt.Sprintf("d%04d/", i), 0, nil, 0)
			}
			return b.End()
		}, "short of the 65536 every one but the last"},
	},
	"chunk-empty": {
		shared("chunk-empty", "an empty chunk first"),
		{"1,000 empty chunks", func(b *hostileBox) error {
			return b.FileOf("f", 1000*snaptree.MinChunk, repeat(b.Send(nil), 1000)...)
		}, "chunk 0 is empty"},
	},
	"file-ids": {
		shared("file-ids", "two ids for 10 bytes"),
		{"200,000 ids for 10 bytes", func(b *hostileBox) error {
			return b.FileOf("f", 10, repeat(b.Send(content(10, 0)), 200_000)...)
		}, "200000 chunks for 10 bytes"},
	},
	"tree-chunks": {
		shared("tree-chunks", "a tree of 4,097 chunks"),
		{"a tree of a million chunks", func(b *hostileBox) error { return bigEnd(b, 1<<20) }, "a tree of 1048576 chunks"},
	},
	"tree-repeat": {
		shared("tree-repeat", "a tree chunk named 65 times"),
		{"a tree chunk named 4,000 times", func(b *hostileBox) error { return repeatTree(b, 4000) }, "more than 64 times"},
	},
	"record-bytes": {
		shared("record-over", "a record of 320 KiB + 1"),
		{"100 entries at the record limit", func(b *hostileBox) error {
			link := strings.Repeat("l", snaptree.MaxRecord-64)
			for i := range 100 {
				b.Entry('2', fmt.Sprintf("l%04d", i), 0, nil, 0, link)
			}
			return b.End()
		}, ""},
	},
	"tree-text": {
		{"270 entries of 256 KiB of PAX", func(b *hostileBox) error { return paxEntries(b, 270) }, "names and PAX records pass"},
		{"480 entries of 256 KiB of PAX", func(b *hostileBox) error { return paxEntries(b, 480) }, "names and PAX records pass"},
	},
	"pax-records": {
		shared("pax-records", "257 PAX records"),
		{"900 entries of 256 PAX records", func(b *hostileBox) error {
			for i := range 900 {
				b.Entry('5', fmt.Sprintf("d%04d/", i), 0, paxOf(snaptree.MaxPAXRecords, 1), 0)
			}
			return b.End()
		}, ""},
	},
	"pax-bytes": {
		shared("pax-bytes", "PAX records of 256 KiB + 1"),
		{"200 entries of 256 KiB of PAX", func(b *hostileBox) error { return paxEntries(b, 200) }, ""},
	},
	"small-chunks": {
		{"one small chunk over", func(b *hostileBox) error { return sendSmall(b, int(smallChunks(matrixLimits))+1) }, "new chunks under 65536 bytes"},
		{"1,100,000 unique 8-byte chunks (issue case 1)", func(b *hostileBox) error { return sendSmall(b, 1_100_000) }, "new chunks under 65536 bytes"},
	},
	"part-chunks": {
		shared("unnamed-chunk", "one chunk the tree does not name"),
		{"unnamed chunks past the count (issue case 3)", func(b *hostileBox) error {
			for i := range int(partChunks(matrixLimits)) + 10 {
				if i < int(smallChunks(matrixLimits)) {
					b.Send(content(8, i))
				} else {
					b.Send(content(snaptree.MinChunk, i))
				}
				if b.Err() != nil {
					return b.Err()
				}
			}
			return b.End()
		}, "new chunks in one part"},
	},
	"names": {
		shared("osc52-name", "an OSC 52 clipboard write in a name (issue case 6)"),
		{"1,000 names with escapes", func(b *hostileBox) error {
			for i := range 1000 {
				b.Entry('5', fmt.Sprintf("d%04d\x1b[2J/", i), 0, nil, 0)
			}
			return b.End()
		}, "a control character"},
	},
}

// shared is chunkwiretest's case name, the one the release matrix's
// test agent sends, as the matrix's case desc.
func shared(name, desc string) streamCase {
	c, ok := chunkwiretest.Find(name)
	if !ok {
		panic("chunkwiretest has no case " + name)
	}
	return streamCase{desc, c.Run, c.Want}
}

// issueCases are the issue's stream cases not a limit's own.
var issueCases = []streamCase{
	{"issue case 4: a record carrying 1 MiB of PAX", func(b *hostileBox) error {
		b.Entry('5', "d/", 0, paxOf(1, 1<<20-256), 0)
		return b.End()
	}, "a record of 1048377 bytes, over the limit of 327680"},
	{"issue case 5: a tree of 12,000 chunks (a 1.5 MB record)", func(b *hostileBox) error { return bigEnd(b, 12_000) }, "a tree of 12000 chunks"},
	shared("within", "an honest rootfs"),
}

// TestStreamLimitsHaveCases: every row of StreamLimits has its cases in
// the matrix (the matrix is generated from the table), and no case is
// for a row that does not exist.
func TestStreamLimitsHaveCases(t *testing.T) {
	for _, l := range StreamLimits {
		if l.Key == "record" {
			continue // TestRecordOfTheLargestTrees
		}
		if len(limitCases[l.Key]) != 2 {
			t.Errorf("limit %q has %d cases in the matrix, want 2 (just over, a flood)", l.Key, len(limitCases[l.Key]))
		}
	}
	for k := range limitCases {
		if !slices.ContainsFunc(StreamLimits, func(l StreamLimit) bool { return l.Key == k }) {
			t.Errorf("the matrix has cases for %q, which StreamLimits does not have", k)
		}
	}
}

// TestRecordOfTheLargestTrees: the "record" row: a record naming
// chunkwire.MaxTree tree chunks in each part, and every other field at
// its longest, is within maxRecord, so every tree the stream takes
// leaves a record that loads.
func TestRecordOfTheLargestTrees(t *testing.T) {
	rec := Record{Format: RecordFormat, Chunker: cdc.Name, Created: time.Now().UTC().Format(time.RFC3339),
		Machine: strings.Repeat("m", 64), Label: strings.Repeat("l", 64), Smolvm: strings.Repeat("s", 64), GOOS: "darwin",
		Fingerprint: strings.Repeat("f", 64), AuditAnchor: strings.Repeat("a", 4096), Parts: map[string]PartRecord{},
		Added: Added{Chunks: 1 << 62, Bytes: 1 << 62, Stored: 1 << 62}}
	for _, p := range Parts {
		pr := PartRecord{Entries: 1 << 62, Bytes: 1 << 62}
		for i := range chunkwire.MaxTree {
			pr.Tree = append(pr.Tree, Sum(fmt.Append(nil, p, i)).String())
		}
		rec.Parts[p] = pr
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	must(t, err)
	t.Logf("the largest record: %d bytes, of %d", len(data), maxRecord)
	if len(data) > maxRecord {
		t.Fatalf("a record of the largest trees takes %d bytes, over the %d Load reads", len(data), maxRecord)
	}
}

// matrixRow is one line of the matrix's table.
type matrixRow struct {
	limit, name, verdict string
	box                  int64
	heap, secs           float64
	verify, stage        float64 // a published backup's, with every chunk read
	rss                  string  // the process's peak RSS during Ingest (Linux), the box's side included
	intact               bool
}

// TestHostileStreamMatrix runs every case through the real Ingest into a
// store holding two honest backups. After each: the stream was refused
// (the store's files and the backups as they were) or published within
// the limits (its record loads, it verifies with every chunk read); the
// store opens; both earlier backups verify with every chunk read and
// stage to their boxes; deleting the older and collecting garbage keeps
// the newer so. The table (bytes from the box, host peak heap, seconds,
// verdict) is logged for the issue's note.
func TestHostileStreamMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the matrix ingests ~30 streams")
	}
	// Its heap figures are the host's without the race detector's
	// shadow memory, and it runs in minutes, not half an hour.
	if runPlain(t) {
		return
	}
	base := t.TempDir()
	var dirs []string
	for gen := range 2 {
		m := meta(gen)
		m.Limits = matrixLimits
		dir, _, err := Ingest(context.Background(), base, m, chunkAgent(boxParts(gen), agentMutation{}, nil), nil)
		must(t, err)
		dirs = append(dirs, filepath.Base(dir))
	}
	var rows []matrixRow
	run := func(limit string, c streamCase) {
		t.Run(limit+"/"+c.name, func(t *testing.T) {
			rows = append(rows, runStreamCase(t, base, dirs, limit, c))
		})
	}
	for _, l := range StreamLimits {
		for _, c := range limitCases[l.Key] {
			run(l.Key, c)
		}
	}
	for _, c := range issueCases {
		run("-", c)
	}
	var b strings.Builder
	b.WriteString("\n| limit | case | bytes from the box | host peak heap | peak RSS | seconds | verdict | verify / stage s | earlier backups intact |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		vs := "-"
		if r.verdict == "published" {
			vs = fmt.Sprintf("%.2f / %.2f", r.verify, r.stage)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f MiB | %s | %.2f | %s | %s | %v |\n", r.limit, r.name, r.box, r.heap, r.rss, r.secs, r.verdict, vs, r.intact)
	}
	t.Log(b.String())
}

// runStreamCase runs c on a copy of the store in base.
func runStreamCase(t *testing.T, base string, dirs []string, limit string, c streamCase) matrixRow {
	backups := t.TempDir()
	if out, err := exec.Command("cp", "-a", base+"/.", backups).CombinedOutput(); err != nil {
		t.Fatalf("copying the store: %v: %s", err, out)
	}
	storeDir := StoreDir(backups, "box")
	before := files(t, storeDir)
	defer capStore(t, storeDir, c.name)()
	m := meta(2)
	m.Limits = matrixLimits
	var sent int64
	src := hostileSource(boxParts(2)[boxlayout.PartWorkspace], c.box, &sent)
	var dir string
	var rec *Record
	resetPeakRSS()
	start := time.Now()
	heap, err := peakHeap(func() error {
		var err error
		dir, rec, err = Ingest(context.Background(), backups, m, src, nil)
		return err
	})
	row := matrixRow{limit: limit, name: c.name, box: sent, heap: heap, secs: time.Since(start).Seconds(), verdict: "published", rss: peakRSS()}
	switch {
	case c.want == "" && err != nil:
		t.Fatalf("a stream within the limits refused: %v", err)
	case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
		t.Fatalf("err = %v, want one saying %q", err, c.want)
	case err != nil:
		row.verdict = "refused: " + shortErr(err.Error(), c.want)
		if !errors.Is(err, ErrStream) && !errors.Is(err, chunkwire.ErrFormat) && !errors.Is(err, snaptree.ErrInvalid) && !errors.Is(err, backup.ErrLimit) {
			t.Errorf("the box's fault is not said to be the box's: %v", err)
		}
		if strings.Contains(err.Error(), "repair") {
			t.Errorf("the box's fault sends the user to repair: %v", err)
		}
		if after := files(t, storeDir); !slices.Equal(after, before) {
			t.Fatalf("a refused stream changed the store:\n%v\nwas\n%v", after, before)
		}
		if entries, _ := os.ReadDir(backups); len(entries) != len(dirs)+1 {
			t.Fatalf("the backups directory holds %v", entries)
		}
	default:
		if _, err := Load(dir, trust); err != nil {
			t.Fatalf("the published backup does not load: %v", err)
		}
		s := openStore(t, storeDir)
		start := time.Now()
		must(t, s.Verify(context.Background(), rec, true))
		row.verify = time.Since(start).Seconds()
		start = time.Now()
		staged, err := s.Stage(context.Background(), rec, t.TempDir(), matrixLimits, projectKey)
		if err != nil {
			t.Fatalf("the published backup does not stage: %v", err)
		}
		row.stage = time.Since(start).Seconds()
		must(t, staged.Remove())
	}
	intact(t, backups, dirs)
	row.intact = true
	return row
}

// intact checks the earlier backups dirs in backups: the store opens,
// each verifies with every chunk read and stages to its box; deleting
// the first and collecting garbage keeps the second so.
func intact(t *testing.T, backups string, dirs []string) {
	t.Helper()
	ctx := context.Background()
	check := func(gen int) {
		dir := filepath.Join(backups, dirs[gen])
		rec, err := Load(dir, trust)
		must(t, err)
		s, err := Open(StoreDir(backups, "box"))
		if err != nil {
			t.Fatalf("the store does not open: %v", err)
		}
		defer s.Close()
		must(t, s.Verify(ctx, rec, true))
		restored(t, backups, dir, gen)
	}
	check(0)
	check(1)
	must(t, os.RemoveAll(filepath.Join(backups, dirs[0])))
	if _, err := Collect(ctx, backups, "box", trust); err != nil {
		t.Fatalf("collecting garbage: %v", err)
	}
	check(1)
}

// resetPeakRSS resets the process's peak RSS (Linux; elsewhere nothing).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak RSS since resetPeakRSS, or "-".
func peakRSS() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "-"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			var kb int64
			if _, err := fmt.Sscan(f[1], &kb); err == nil {
				return fmt.Sprintf("%d MiB", kb>>10)
			}
		}
	}
	return "-"
}

func shortErr(s, want string) string {
	if i := strings.Index(s, want); i >= 0 {
		s = s[i:]
	}
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

// hostileSource is the box's side: the rootfs part as rootfs makes it,
// the workspace the honest box's; sent counts the bytes the box wrote.
func hostileSource(ws []tfile, rootfs func(b *hostileBox) error, sent *int64) ChunkSource {
	honest := chunktest.Agent(map[string][]byte{boxlayout.PartWorkspace: gzipTar(ws)}, chunktest.Mutation{}, nil)
	return func(ctx context.Context, part string, in io.Reader, w io.Writer) error {
		cw := &counted{w: w, n: sent}
		if part != boxlayout.PartRootfs {
			return honest(ctx, part, in, cw)
		}
		held, err := chunkwire.ReadHeld(in)
		if err != nil {
			return err
		}
		zw, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(chunkwire.MaxChunk), zstd.WithLowerEncoderMem(true))
		defer zw.Close()
		b := chunkwiretest.NewBox(held, cw)
		b.Compress = func(data []byte) []byte { return zw.EncodeAll(data, nil) }
		return rootfs(b)
	}
}

type counted struct {
	w io.Writer
	n *int64
}

func (c *counted) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// hostileBox is the compromised box's side of a stream (chunkwiretest's,
// the one the release matrix's test agent sends).
type hostileBox = chunkwiretest.Box

// oversized sends n chunk frames of chunkwire.MaxChunk + 1 bytes.
func oversized(b *hostileBox, n int) error {
	big := make([]byte, chunkwire.MaxChunk+1)
	for range n {
		if err := b.Chunk(chunkwire.Chunk{ID: Sum(big), Plain: uint32(len(big)), Stored: big}); err != nil {
			return err
		}
	}
	return b.End()
}

// bigEnd sends an end frame naming n tree chunks.
func bigEnd(b *hostileBox, n int) error {
	tree, err := b.Cut()
	if err != nil {
		return err
	}
	return b.EndWith(repeat(tree[0], n))
}

// repeatTree names one 64 KiB tree chunk n times before the tree.
func repeatTree(b *hostileBox, n int) error {
	pad := b.Send(content(snaptree.MinChunk, 1<<30))
	tree, err := b.Cut()
	if err != nil {
		return err
	}
	return b.EndWith(append(repeat(pad, n), tree...))
}

// sendSmall sends n unique 8-byte chunks, then the tree.
func sendSmall(b *hostileBox, n int) error {
	for i := range n {
		b.Send(content(8, i))
		if b.Err() != nil {
			return b.Err()
		}
	}
	return b.End()
}

// paxEntries writes n directories of snaptree.MaxPAXBytes of PAX each.
func paxEntries(b *hostileBox, n int) error {
	for i := range n {
		b.Entry('5', fmt.Sprintf("d%04d/", i), 0, paxOf(1, snaptree.MaxPAXBytes-len(paxOf(1, 0)[0][0])), 0)
	}
	return b.End()
}

var (
	content = chunkwiretest.Content
	repeat  = chunkwiretest.Repeat
	paxOf   = chunkwiretest.PAX
)
