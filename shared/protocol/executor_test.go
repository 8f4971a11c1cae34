package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDiscoveryRefreshGolden: the agent's refresh-discovery result as the
// host decodes it, byte for byte.
func TestDiscoveryRefreshGolden(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "executor-refresh.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got DiscoveryRefresh
	if err := json.Unmarshal(golden, &got); err != nil {
		t.Fatal(err)
	}
	if want := (DiscoveryRefresh{Restarted: true, BootID: "6f1e0c3a-2b1d-4e5f-8a9b-0c1d2e3f4a5b"}); got != want {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(b, '\n'), golden) {
		t.Fatalf("encoded %s, golden %s", b, golden)
	}
}
