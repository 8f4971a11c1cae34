package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/health"
)

// bigTree is the 0.16.0 fixture padded to the size of the real files
// (gateway/run.py is about 800 KB at 81eaedd0, tools/approval.py 80 KB,
// agent/auxiliary_client.py 230 KB).
func bigTree(b *testing.B) string {
	dir := fixture(b, "0.16.0")
	pad := map[string]int{"gateway/run.py": 800 << 10, approvalPy: 80 << 10, auxPy: 230 << 10}
	for file, size := range pad {
		src := read(b, dir, file)
		filler := strings.Repeat("# filler line that matches no anchor at all\n", size/44)
		write(b, dir, file, filler+src+filler)
	}
	return dir
}

// BenchmarkReadTree is the baseline: reading the three files once.
func BenchmarkReadTree(b *testing.B) {
	dir := bigTree(b)
	b.ResetTimer()
	for b.Loop() {
		for _, f := range []string{approvalPy, "gateway/run.py", auxPy} {
			if _, err := os.ReadFile(filepath.Join(dir, f)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCheck is `patch --check`: every requirement of the tree's release.
func BenchmarkCheck(b *testing.B) {
	dir := bigTree(b)
	b.ResetTimer()
	for b.Loop() {
		rep, err := Check(dir)
		if err != nil || !rep.Accepted {
			b.Fatal(rep, err)
		}
	}
}

// BenchmarkHealth is the gate check on the real 0.19.0 tree, installed:
// "miss" runs Hermes' Python every time (as without the verdict cache, or
// after any input changed), "hit" answers from the verdict cache and the
// anchors' kept verification (which the first check keeps).
func BenchmarkHealth(b *testing.B) {
	rel := release(b, "0.19.0")
	src := hermestest.CopyTree(b, hermestest.RealTree(b, rel.Version))
	if err := patch.WriteSourceMarker(src, rel.Commit); err != nil {
		b.Fatal(err)
	}
	tgt := Target{Source: src, Python: hermestest.Python(b), Home: b.TempDir(), Managed: filepath.Join(b.TempDir(), "etc-hermes"),
		Commit: rel.Commit, Runner: command.ExecRunner{}, Verdicts: verdictsIn(b.TempDir())}
	ctx := context.Background()
	if err := (Installer{Integration: true}).Apply(ctx, tgt); err != nil {
		b.Fatal(err)
	}
	cached := tgt
	tgt.Verdicts = nil
	for _, c := range []struct {
		name string
		t    Target
	}{{"miss", tgt}, {"hit", cached}} {
		name, t := c.name, c.t
		b.Run(name, func(b *testing.B) {
			Health(ctx, t, time.Now())
			for b.Loop() {
				if c, _ := Health(ctx, t, time.Now()); c.Status != health.StatusHealthy {
					b.Fatal(c.Message)
				}
			}
		})
	}
}
