package pins

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// TestPublishedDigestsStayData: every published digest is well formed and
// has its source and the reason it is unused; Hermes 0.21.x stays refused
// by name although its installer digests are known, and the defaults keep
// a SHA-256 of what the guest installs.
func TestPublishedDigestsStayData(t *testing.T) {
	for _, d := range PublishedDigests {
		ok := false
		switch d.Algorithm {
		case "sha256":
			b, err := hex.DecodeString(d.Digest)
			ok = err == nil && len(b) == 32
		case "sha512":
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(d.Digest, "sha512-"))
			ok = err == nil && len(b) == 64 && strings.HasPrefix(d.Digest, "sha512-")
		}
		if !ok || d.Source == "" || d.Unused == "" {
			t.Errorf("row %+v: malformed, or no source or reason", d)
		}
		if d.Artifact == "hermes-installer" {
			if _, err := HermesByVersion(d.Version); !errors.Is(err, ErrRefusedRelease) {
				t.Errorf("Hermes %s: %v; want refused by name", d.Version, err)
			}
		}
	}
	for _, a := range []Artifact{Codex, UV} {
		if _, ok := a.SHA256[SupportedGuestArch]; !ok {
			t.Errorf("%s %s is a default without a SHA-256 of the artifact the guest installs", a.Name, a.Version)
		}
	}
}
