package cli_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// partBytes are the bytes each part of an incremental snapshot read in
// the box and sent over the relay, from its "snapshot PART: read …,
// new …, sent …" lines.
func partBytes(t *testing.T, stderr string) (read, sent map[string]float64) {
	t.Helper()
	size := `([0-9.]+) (B|KiB|MiB|GiB)`
	rx := regexp.MustCompile(`snapshot (rootfs|workspace): read ` + size + `, new [^,]+, sent ` + size)
	bytes := func(n, unit string) float64 {
		f, err := strconv.ParseFloat(n, 64)
		boxtest.Must(t, err)
		return f * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	}
	read, sent = map[string]float64{}, map[string]float64{}
	for _, m := range rx.FindAllStringSubmatch(stderr, -1) {
		read[m[1]], sent[m[1]] = bytes(m[2], m[3]), bytes(m[4], m[5])
	}
	if len(sent) != 2 {
		t.Fatalf("no progress line of both parts in:\n%s", stderr)
	}
	return read, sent
}

// added is what an incremental backup's record says it added.
func added(t *testing.T, dir string) (chunks, bytes int64) {
	t.Helper()
	var rec struct {
		Added struct{ Chunks, Bytes int64 } `json:"added"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(dir, "snapshot.json")), &rec))
	return rec.Added.Chunks, rec.Added.Bytes
}

// noise is n deterministic bytes that do not compress.
func noise(seed string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s %d", seed, i))
		b.Write(sum[:])
	}
	return b.String()[:n]
}

// TestIncrementalSnapshotRestore runs incremental snapshots (the default)
// end to end through the real binary, Debian's sshd, the fake smolvm and the
// real agent: snapshot, change a note and a stretch of a large file,
// snapshot again (which sends only the changed chunks over the relay),
// restore the first (its safety snapshot incremental too), then the
// second.
func TestIncrementalSnapshotRestore(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	root := filepath.Join(h.State, "machines", boxtest.Machine, "root")
	bigPath := filepath.Join(root, "workspace/work/big.bin")
	big := noise("big", 6<<20)
	boxtest.Must(t, os.WriteFile(bigPath, []byte(big), 0o644))
	h.WriteNote("before\n")

	r := mustRun(t, h, "snapshot", "first")
	first := strings.TrimSpace(r.stdout)
	read1, sent1 := partBytes(t, r.stderr)
	rss1 := r.maxRSSKiB
	chunks1, bytes1 := added(t, first)

	h.WriteNote("after\n")
	changed := big[:3<<20] + noise("edit", 64<<10) + big[3<<20+64<<10:]
	boxtest.Must(t, os.WriteFile(bigPath, []byte(changed), 0o644))
	r = mustRun(t, h, "snapshot", "second")
	second := strings.TrimSpace(r.stdout)
	read2, sent2 := partBytes(t, r.stderr)
	rss2 := r.maxRSSKiB
	chunks2, bytes2 := added(t, second)
	t.Logf("first: %d chunks, %d bytes added, read %v, sent %v, host peak RSS %d KiB; second: %d chunks, %d bytes added, read %v, sent %v, host peak RSS %d KiB",
		chunks1, bytes1, read1, sent1, rss1, chunks2, bytes2, read2, sent2, rss2)
	if bytes1 < 6<<20 || sent1["workspace"] < 6<<20 {
		t.Fatalf("the first snapshot added %d bytes and sent %v", bytes1, sent1)
	}
	// The edit touches one or two chunks of the large file (at most 2 MiB)
	// plus the note and the trees.
	// The agent's cache of the first (committed) snapshot: the rootfs is
	// not read again, the workspace's unchanged files neither.
	if read2["rootfs"] > read1["rootfs"]/4 || read2["workspace"] > 7<<20 {
		t.Fatalf("the second snapshot read %v (the first %v)", read2, read1)
	}
	if bytes2 > 3<<20 || sent2["workspace"] > 3<<20 || sent2["workspace"] > sent1["workspace"]/2 {
		t.Fatalf("the second snapshot added %d bytes and sent %v (the first sent %v)", bytes2, sent2, sent1)
	}

	r = mustRun(t, h, "restore", first)
	t.Logf("restore of the first: host peak RSS %d KiB", r.maxRSSKiB)
	if got := h.ReadNote(); got != "before\n" {
		t.Fatalf("note after restoring the first = %q", got)
	}
	if got := string(boxtest.ReadFile(t, bigPath)); got != big {
		t.Fatal("the large file after restoring the first is not the first's")
	}
	h.CheckReplacement(r.calls)
	safety, _ := filepath.Glob(filepath.Join(h.Root, "backups", "hermes-box-*-pre-restore.hermesbox"))
	if len(safety) != 1 {
		t.Fatalf("safety snapshots: %v", safety)
	}
	if _, err := os.Stat(filepath.Join(safety[0], "snapshot.json")); err != nil {
		t.Fatalf("the safety snapshot is not incremental: %v", err)
	}
	mustRun(t, h, "restore", second)
	if got := h.ReadNote(); got != "after\n" {
		t.Fatalf("note after restoring the second = %q", got)
	}
	expectHealthy(t, h, "after the restores")
}
