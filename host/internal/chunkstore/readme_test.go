package chunkstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/limits.md's table of the chunk stream's limits lies between these.
const (
	streamBegin = "<!-- chunk stream limits: generated from host/internal/chunkstore/limits.go by TestREADMEStreamTable -->\n"
	streamEnd   = "<!-- end of chunk stream limits -->\n"
)

// streamTable is docs/limits.md's table of StreamLimits.
func streamTable() string {
	var b strings.Builder
	b.WriteString("| what the box sends | limit | checked |\n|---|---|---|\n")
	for _, l := range StreamLimits {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", l.What, l.Shown(), l.Checked)
	}
	return b.String()
}

// TestREADMEStreamTable: the list of the chunk stream's limits in
// docs/limits.md (linked from the README) is StreamLimits.
// HBX_UPDATE_README=1 rewrites it.
func TestREADMEStreamTable(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "limits.md")
	b, err := os.ReadFile(path)
	must(t, err)
	readme := string(b)
	start, end := strings.Index(readme, streamBegin), strings.Index(readme, streamEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/limits.md has no stream table between %q and %q", streamBegin, streamEnd)
	}
	got, want := readme[start+len(streamBegin):end], streamTable()
	if got == want {
		return
	}
	if os.Getenv("HBX_UPDATE_README") == "1" {
		must(t, os.WriteFile(path, []byte(readme[:start+len(streamBegin)]+want+readme[end:]), 0o644))
		return
	}
	t.Errorf("docs/limits.md's stream table is not StreamLimits of host/internal/chunkstore/limits.go (HBX_UPDATE_README=1 rewrites it):\n%s", want)
}
