package snaptree

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoldenTree freezes the encoding: the ids of every content chunk and
// of the tree of a fixed box. A change here changes the chunks every store
// holds for the same files (an agent and a host of different releases
// would no longer share them); re-freeze with UPDATE_GOLDEN=1 only on
// purpose.
func TestGoldenTree(t *testing.T) {
	var got strings.Builder
	tree, st, err := Encode(bytes.NewReader(tarOf(t, box(random("golden", 3<<20)))), func(id ID, data []byte) error {
		fmt.Fprintf(&got, "chunk %x %d\n", id, len(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tree {
		fmt.Fprintf(&got, "tree %x\n", id)
	}
	fmt.Fprintf(&got, "entries %d bytes %d read %d\n", st.Entries, st.Bytes, st.Read)
	path := filepath.Join("testdata", "tree.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("the encoding changed (a frozen format):\n got %s\nwant %s", got.String(), want)
	}
}
