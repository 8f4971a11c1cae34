package backup

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseSums(f *testing.F) {
	f.Add([]byte(Sums{FileRootfs: "aa", FileListing: "bb", FileWorkspace: "cc", FileWarnings: "dd", FileManifest: "ee"}.Bytes()))
	f.Add([]byte("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  rootfs.tar.gz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSums(data)
		if err != nil {
			return
		}
		again, err := ParseSums(s.Bytes())
		if err != nil || len(again) != len(Files) {
			t.Fatalf("round trip of %q: %v", data, err)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(Manifest{Format: Format, Created: "2026-01-01T00:00:00Z", Machine: "m", Smolvm: "1.0.4", GOOS: "linux", Fingerprint: "SHA256:x"}.Bytes()))
	f.Add([]byte("format=hermes-box-v2\n=x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		if m.Format != Format {
			t.Fatalf("accepted format %q", m.Format)
		}
		for _, v := range []string{m.Created, m.Machine, m.Smolvm, m.GOOS, m.Fingerprint} {
			if strings.IndexFunc(v, isControl) >= 0 || !utf8.ValidString(v) {
				t.Fatalf("accepted the field %q", v)
			}
		}
	})
}

// TestParseManifestRefusesControls: a foreign manifest whose fields would
// write to the terminal (an escape, a CR, a bidi override) is refused,
// naming the line.
func TestParseManifestRefusesControls(t *testing.T) {
	for _, bad := range []string{"machine=m\x1b]0;t\x07", "machine=m\rX", "smolvm=1\u202e", "goos=\xff", "created=\u009b2J"} {
		_, err := ParseManifest([]byte("format=hermes-box-v2\n" + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "manifest.txt line 2") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
