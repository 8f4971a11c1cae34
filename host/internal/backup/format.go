// Package backup is the hermes-box-v2 backup format on the host: writing a
// backup from two streamed parts, verifying one, staging a read-only copy,
// the restore state machine, reaping what an interrupted operation left,
// and the portable package.
//
// A backup is a directory <machine>-<YYYYMMDD-HHMMSS>-<label>[-N].hermesbox
// (0700) holding six files (0600): rootfs.tar.gz, rootfs-files.txt,
// workspace.tar.gz, snapshot-warnings.log (empty), manifest.txt and
// SHA256SUMS, the layout the reference implementation reads and writes,
// and a seventh, SHA256SUMS.sig, the project key's SSH signature of
// SHA256SUMS (sign.go).
package backup

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Format is the manifest's format value.
const Format = "hermes-box-v2"

// Suffix ends every backup directory name.
const Suffix = ".hermesbox"

// The files of a backup.
const (
	FileRootfs    = boxlayout.PartRootfs + ".tar.gz"
	FileListing   = "rootfs-files.txt"
	FileWorkspace = boxlayout.PartWorkspace + ".tar.gz"
	FileWarnings  = "snapshot-warnings.log"
	FileManifest  = "manifest.txt"
	FileSums      = "SHA256SUMS"
)

// Files are the checksummed files, in SHA256SUMS order.
var Files = []string{FileRootfs, FileListing, FileWorkspace, FileWarnings, FileManifest}

// Part is one archive of a backup: the box's part it holds and its file.
type Part struct{ Name, File string }

// Parts are a backup's archives, in the order they are written, staged
// and applied.
var Parts = []Part{{boxlayout.PartRootfs, FileRootfs}, {boxlayout.PartWorkspace, FileWorkspace}}

// PartFile is the file of the part named part ("" for none).
func PartFile(part string) string {
	for _, p := range Parts {
		if p.Name == part {
			return p.File
		}
	}
	return ""
}

// maxSmallFile bounds the files read whole (sums, manifest, listing is
// streamed).
const maxSmallFile = 1 << 20

// Manifest is manifest.txt.
type Manifest struct {
	Format  string
	Created string // UTC RFC 3339
	Machine string
	Smolvm  string
	GOOS    string
	// Fingerprint is the SSH key fingerprint ("SHA256:…"); empty in legacy
	// backups.
	Fingerprint string
	// AuditAnchor is the host's audit anchor when the backup was written
	// (one line of JSON, auditanchor's format); empty in older backups.
	// restore installs it: it describes the backup's audit log.
	AuditAnchor string
}

// Legacy reports a backup written before fingerprints were recorded.
func (m Manifest) Legacy() bool { return m.Fingerprint == "" }

// Bytes renders the manifest as key=value lines.
func (m Manifest) Bytes() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "format=%s\ncreated=%s\nmachine=%s\nsmolvm=%s\ngoos=%s\n", m.Format, m.Created, m.Machine, m.Smolvm, m.GOOS)
	if m.Fingerprint != "" {
		fmt.Fprintf(&b, "ssh_key_fingerprint=%s\n", m.Fingerprint)
	}
	if m.AuditAnchor != "" {
		fmt.Fprintf(&b, "audit_anchor=%s\n", m.AuditAnchor)
	}
	return b.Bytes()
}

// ParseManifest reads key=value lines; every line needs "=" and a key.
// Unknown keys are ignored; format must be hermes-box-v2.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	fields := map[string]*string{
		"format": &m.Format, "created": &m.Created, "machine": &m.Machine,
		"smolvm": &m.Smolvm, "goos": &m.GOOS, "ssh_key_fingerprint": &m.Fingerprint, "audit_anchor": &m.AuditAnchor,
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return Manifest{}, fmt.Errorf("%s line %d: want key=value, got %q", FileManifest, i+1, line)
		}
		if j := strings.IndexFunc(line, isControl); j >= 0 || !utf8.ValidString(line) {
			// A foreign manifest's fields are printed (backups, restore):
			// a control character there would reach the terminal.
			return Manifest{}, fmt.Errorf("%s line %d: a control character or bytes that are not UTF-8", FileManifest, i+1)
		}
		if p, known := fields[k]; known {
			*p = v
		}
	}
	if m.Format != Format {
		return Manifest{}, fmt.Errorf("%s: format %q, want %q", FileManifest, m.Format, Format)
	}
	if m.Fingerprint != "" && !strings.HasPrefix(m.Fingerprint, "SHA256:") {
		return Manifest{}, fmt.Errorf("%s: ssh_key_fingerprint %q must start with %q", FileManifest, m.Fingerprint, "SHA256:")
	}
	return m, nil
}

// isControl reports a character a terminal may obey (a C0 or C1
// control, DEL, or an invisible format character such as a bidi override).
func isControl(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// Sums maps each checksummed file to its lowercase hex SHA-256.
type Sums map[string]string

// Bytes renders SHA256SUMS in the sha256sum format, in Files order.
func (s Sums) Bytes() []byte {
	var b bytes.Buffer
	for _, f := range Files {
		fmt.Fprintf(&b, "%s  %s\n", s[f], f)
	}
	return b.Bytes()
}

// ParseSums reads SHA256SUMS: exactly one "<hex>  <name>" line for each
// of the five files, nothing else.
func ParseSums(data []byte) (Sums, error) {
	known := map[string]bool{}
	for _, f := range Files {
		known[f] = true
	}
	s := Sums{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s line %d: want \"<sha256>  <file>\", got %q", FileSums, i+1, line)
		}
		sum, name := strings.ToLower(f[0]), strings.TrimPrefix(f[1], "*")
		if d, err := hex.DecodeString(sum); err != nil || len(d) != 32 {
			return nil, fmt.Errorf("%s line %d: %q is not a SHA-256", FileSums, i+1, f[0])
		}
		if !known[name] {
			return nil, fmt.Errorf("%s line %d: unexpected file %q", FileSums, i+1, name)
		}
		if _, dup := s[name]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", FileSums, i+1, name)
		}
		s[name] = sum
	}
	var missing []string
	for _, f := range Files {
		if _, ok := s[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing %s", FileSums, strings.Join(missing, ", "))
	}
	return s, nil
}

// ErrInvalid marks a backup that fails verification.
var ErrInvalid = errors.New("invalid backup")
