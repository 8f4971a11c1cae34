package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
