package backup

import "testing"

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
	})
}
