package patch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigTree is a fixture tree padded to the size of the real files (run.py is
// about 800 KB at 81eaedd0, approval.py 80 KB, auxiliary_client.py 230 KB).
func bigTree(b *testing.B) string {
	dir := fixtureTree(b, v16)
	pad := map[string]int{gatewayFile: 800 << 10, approvalFile: 80 << 10, auxClientFile: 230 << 10}
	for file, size := range pad {
		src := readFile(b, dir, file)
		filler := strings.Repeat("# filler line that matches no anchor at all\n", size/44)
		writeFile(b, dir, file, filler+string(src)+filler)
	}
	return dir
}

// BenchmarkReadTree is the baseline: reading the three files once.
func BenchmarkReadTree(b *testing.B) {
	dir := bigTree(b)
	b.ResetTimer()
	for b.Loop() {
		for _, f := range []string{approvalFile, gatewayFile, auxClientFile} {
			if _, err := os.ReadFile(filepath.Join(dir, f)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCheck is `patch --check`: every anchor of every set.
func BenchmarkCheck(b *testing.B) {
	dir := bigTree(b)
	b.ResetTimer()
	for b.Loop() {
		rep, err := Check(dir)
		if err != nil || len(rep.Matching) != 2 {
			b.Fatal(rep, err)
		}
	}
}
