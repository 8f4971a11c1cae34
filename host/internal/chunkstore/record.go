package chunkstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/cdc"
)

// An incremental backup is a directory <machine>-<date>-<label>[-N]
// .hermesbox, like a hermes-box-v2 one, holding two files: RecordFile,
// the record, whose trees name chunks in the machine's store (StoreDir),
// and RecordSignature, its signature by the project key. The directory is published by rename after the store's
// index, which is the one commit point of a snapshot.
const (
	RecordFile = "snapshot.json"
	// RecordSignature is the project key's SSH signature (SSHSIG,
	// namespace backup.SignatureNamespace) of RecordFile's bytes:
	//
	//	ssh-keygen -Y verify -f allowed_signers -I hermes-box -n hermes-box-backup@hermes-box -s snapshot.json.sig < snapshot.json
	RecordSignature = RecordFile + ".sig"
	RecordFormat    = "hermes-box-chunks-1"
	// storesDir, below the backups directory, holds one store per machine.
	storesDir = ".chunks"
	// recordTempPrefix names a record's directory before it is published.
	recordTempPrefix = ".hermes-box-chunks-"
	maxRecord        = 1 << 20
	maxSignature     = 16 << 10
)

// Parts are the parts of a backup, in order.
var Parts = []string{boxlayout.PartRootfs, boxlayout.PartWorkspace}

// StoreDir is the chunk store of machine below backupsDir.
func StoreDir(backupsDir, machine string) string {
	return filepath.Join(backupsDir, storesDir, machine)
}

// Record is an incremental backup's snapshot.json.
type Record struct {
	Format      string `json:"format"`
	Chunker     string `json:"chunker"`
	Created     string `json:"created"` // UTC RFC 3339
	Machine     string `json:"machine"`
	Label       string `json:"label"`
	Smolvm      string `json:"smolvm"`
	GOOS        string `json:"goos"`
	Fingerprint string `json:"ssh_key_fingerprint"`
	// AuditAnchor is the box's audit anchor line (backup.Manifest's).
	AuditAnchor string                `json:"audit_anchor,omitempty"`
	Parts       map[string]PartRecord `json:"parts"`
	// Added is what this backup added to the store.
	Added Added `json:"added"`
}

// PartRecord is one part: its tree's chunks, its entries and the bytes
// of its files.
type PartRecord struct {
	Tree    []string `json:"tree"`
	Entries int64    `json:"entries"`
	Bytes   int64    `json:"bytes"`
}

// Added counts the chunks a backup added to the store: their number,
// their plaintext and their compressed size.
type Added struct {
	Chunks int64 `json:"chunks"`
	Bytes  int64 `json:"bytes"`
	Stored int64 `json:"stored"`
}

// treeIDs parses a part's tree.
func (p PartRecord) treeIDs() ([]ID, error) {
	ids := make([]ID, 0, len(p.Tree))
	for _, s := range p.Tree {
		id, err := ParseID(s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Meta is what the record says of the backup's origin, as backup.Write
// takes it.
func (r *Record) Meta() (backup.Meta, error) {
	now, err := time.Parse(time.RFC3339, r.Created)
	if err != nil {
		return backup.Meta{}, fmt.Errorf("%s: created %q: %w", RecordFile, r.Created, err)
	}
	return backup.Meta{Machine: r.Machine, Label: r.Label, Smolvm: r.Smolvm, GOOS: r.GOOS, AuditAnchor: r.AuditAnchor, Now: now}, nil
}

// IsIncremental reports whether the backup directory dir holds a record.
func IsIncremental(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, RecordFile))
	return err == nil && fi.Mode().IsRegular()
}

// Load reads the record of the backup in dir, checks its signature
// against t first (a record is always signed: t.LegacyOK does not
// apply), then its format, its chunker, both parts and nothing else,
// every tree id well formed, and that it names its signer.
func Load(dir string, t backup.Trust) (*Record, error) {
	data, err := readRecordFile(filepath.Join(dir, RecordFile), maxRecord)
	if err != nil {
		return nil, err
	}
	sig, err := readRecordFile(filepath.Join(dir, RecordSignature), maxSignature)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, backup.ErrUnsigned)
	}
	return decodeRecord(dir, data, sig, t)
}

// decodeRecord is Load of the record data signed by sig, as found in dir.
func decodeRecord(dir string, data, sig []byte, t backup.Trust) (*Record, error) {
	for _, f := range []struct {
		name  string
		data  []byte
		limit int
	}{{RecordFile, data, maxRecord}, {RecordSignature, sig, maxSignature}} {
		if len(f.data) > f.limit {
			return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", backup.ErrInvalid, filepath.Join(dir, f.name), len(f.data), f.limit)
		}
	}
	signer, err := keys.Verify(sig, backup.SignatureNamespace, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", backup.ErrInvalid, filepath.Join(dir, RecordSignature), err)
	}
	if t.Key != nil && !bytes.Equal(signer.Marshal(), t.Key.Marshal()) {
		return nil, fmt.Errorf("%w: %s is signed by %s, this project's key is %s", backup.ErrForeign, dir,
			keys.Fingerprint(signer), keys.Fingerprint(t.Key))
	}
	path := filepath.Join(dir, RecordFile)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", backup.ErrInvalid, path, err)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", backup.ErrInvalid, path, err)
	}
	if r.Fingerprint != keys.Fingerprint(signer) {
		return nil, fmt.Errorf("%w: %s records %s, but it is signed by %s", backup.ErrInvalid, path, r.Fingerprint, keys.Fingerprint(signer))
	}
	return &r, nil
}

// readRecordFile reads a regular file of at most limit bytes.
func readRecordFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backup.ErrInvalid, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", backup.ErrInvalid, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", backup.ErrInvalid, path, limit)
	}
	return data, nil
}

func (r *Record) check() error {
	switch {
	case r.Format != RecordFormat:
		return fmt.Errorf("format %q, want %q", r.Format, RecordFormat)
	case r.Chunker != cdc.Name:
		return fmt.Errorf("chunker %q, want %q", r.Chunker, cdc.Name)
	case r.Machine == "" || strings.ContainsAny(r.Machine, "/\x00"):
		return fmt.Errorf("machine %q", r.Machine)
	}
	if _, err := r.Meta(); err != nil {
		return err
	}
	// The anchor a restore installs, checked as a v2 manifest's is.
	if r.AuditAnchor != "" {
		if _, err := auditanchor.ParseLine(r.AuditAnchor); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(r.Parts))
	for name, p := range r.Parts {
		names = append(names, name)
		if _, err := p.treeIDs(); err != nil {
			return fmt.Errorf("part %s: %w", name, err)
		}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(Parts)); !slices.Equal(names, want) {
		return fmt.Errorf("parts %v, want %v", names, want)
	}
	return nil
}

// seal is the record's bytes and their signature, as publish writes
// them; a record that Load would refuse (over maxRecord, or anything
// else it checks) is an error.
func (r *Record) seal(meta backup.Meta) (data, sig []byte, err error) {
	data, err = json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	data = append(data, '\n')
	sig, err = keys.Sign(meta.Signer, backup.SignatureNamespace, bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("signing the backup: %w", err)
	}
	// A record the host cannot load again would stop every prune and GC
	// of the machine.
	if _, err := decodeRecord("the new backup", data, sig, backup.Trust{Key: meta.Signer.PublicKey()}); err != nil {
		return nil, nil, fmt.Errorf("refusing a record that would not load: %w", err)
	}
	return data, sig, nil
}

// publish writes the sealed record data and its signature sig into a new
// directory and publishes it below backupsDir, never replacing anything;
// it returns the directory.
func publish(backupsDir string, meta backup.Meta, data, sig []byte) (dir string, err error) {
	tmp, err := os.MkdirTemp(backupsDir, recordTempPrefix)
	if err != nil {
		return "", fmt.Errorf("creating backup: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, f := range []struct {
		name string
		data []byte
	}{{RecordFile, data}, {RecordSignature, sig}} {
		if err := atomicfile.WriteNew(filepath.Join(tmp, f.name), f.data, 0o600); err != nil {
			return "", err
		}
	}
	crashPoint("record-written")
	return backup.PublishDir(tmp, backupsDir, meta.BaseName())
}

// ReapTemps removes record directories an interrupted snapshot left in
// backupsDir: only those named as publish makes them, holding nothing but
// a record or its temp file. Call it while holding the operation lock.
func ReapTemps(backupsDir string) ([]string, error) {
	entries, err := os.ReadDir(backupsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), recordTempPrefix) || !e.IsDir() {
			continue
		}
		p := filepath.Join(backupsDir, e.Name())
		if err := reapRecordDir(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// reapRecordDir removes an unpublished record directory.
func reapRecordDir(p string) error {
	inner, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, f := range inner {
		if !f.Type().IsRegular() || !recordFileName(f.Name()) {
			return fmt.Errorf("not reaping %s: unexpected entry %q", p, f.Name())
		}
	}
	return os.RemoveAll(p)
}

// recordFileName is a file publish writes, or its temp file.
func recordFileName(name string) bool {
	for _, f := range []string{RecordFile, RecordSignature} {
		if name == f || strings.HasPrefix(name, "."+f+".tmp-") {
			return true
		}
	}
	return false
}
