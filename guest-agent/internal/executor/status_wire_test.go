package executor

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// TestStatusResultIsTheSharedWireType: what `executor status` prints
// decodes strictly into shared/protocol's ExecutorStatus, which the host
// reads, and encodes back to the same bytes: no field is the agent's alone.
func TestStatusResultIsTheSharedWireType(t *testing.T) {
	n, m := int64(7), int64(9)
	rel := oci.Release{Name: "ab", Dir: "/d/ab", ImageReference: "r:v@sha256:ab", RepositoryDigest: "r@sha256:ab",
		ManifestDigest: "sha256:ab", Layout: oci.LayoutPackaged}
	res := StatusResult{Current: &rel, Releases: []oci.Release{rel, {Name: "cd"}}, RuntimeBytes: &n, DataBytes: &m}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var wire protocol.ExecutorStatus
	if err := dec.Decode(&wire); err != nil {
		t.Fatalf("%s does not decode as protocol.ExecutorStatus: %v", b, err)
	}
	back, err := json.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, b) {
		t.Errorf("protocol.ExecutorStatus re-encodes\n%s\nas\n%s", b, back)
	}
}
