package smolvm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// BinariesFile, in the host's state directory, remembers the smolvm
// executables hermes-box has checked, by path and content hash.
const BinariesFile = "smolvm-binaries.json"

// Binary is one smolvm executable: where it is and what it holds.
type Binary struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// BinaryRecord is what hermes-box remembers of a Binary.
type BinaryRecord struct {
	Binary
	Version string `json:"version"`
	// FlagsChecked is when its `--help` listed every flag hermes-box
	// passes.
	FlagsChecked time.Time `json:"flagsChecked"`
	// Doctor is the last `hermes-box doctor` verdict on it.
	Doctor *DoctorRun `json:"doctor,omitempty"`
}

// DoctorRun is one `hermes-box doctor` verdict.
type DoctorRun struct {
	// Run names the run: the time it started, RFC 3339.
	Run    string `json:"run"`
	Passed bool   `json:"passed"`
	// Failed are the rows that failed.
	Failed []string `json:"failed,omitempty"`
}

// Binaries is the record of checked smolvm executables in a state
// directory, and how to find the executable the driver runs.
type Binaries struct {
	// File is <state>/smolvm-binaries.json.
	File string
	// Locate returns the path of the smolvm the driver runs.
	Locate func() (string, error)
}

// NewBinaries is the record in stateDir, for the smolvm found on PATH.
func NewBinaries(stateDir string) *Binaries {
	return &Binaries{File: filepath.Join(stateDir, BinariesFile), Locate: func() (string, error) {
		p, err := exec.LookPath("smolvm")
		if err != nil {
			return "", err
		}
		return filepath.Abs(p)
	}}
}

// current identifies the executable the driver runs.
func (b *Binaries) current() (Binary, error) {
	p, err := b.Locate()
	if err != nil {
		return Binary{}, fmt.Errorf("finding smolvm: %w", err)
	}
	f, err := os.Open(p)
	if err != nil {
		return Binary{}, fmt.Errorf("reading smolvm: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Binary{}, fmt.Errorf("hashing %s: %w", p, err)
	}
	return Binary{Path: p, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// records reads the file; a missing file is an empty record.
func (b *Binaries) records() ([]BinaryRecord, error) {
	raw, err := os.ReadFile(b.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []BinaryRecord
	if err := json.Unmarshal(raw, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", b.File, err)
	}
	return rs, nil
}

// lookup returns the record of bin, if any.
func (b *Binaries) lookup(bin Binary) (BinaryRecord, bool, error) {
	rs, err := b.records()
	if err != nil {
		return BinaryRecord{}, false, err
	}
	i := slices.IndexFunc(rs, func(r BinaryRecord) bool { return r.Binary == bin })
	if i < 0 {
		return BinaryRecord{}, false, nil
	}
	return rs[i], true, nil
}

// put records rec, replacing any earlier record of the same path.
func (b *Binaries) put(rec BinaryRecord) error {
	rs, err := b.records()
	if err != nil {
		return err
	}
	rs = slices.DeleteFunc(rs, func(r BinaryRecord) bool { return r.Path == rec.Path })
	raw, err := json.MarshalIndent(append(rs, rec), "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.File), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(b.File, append(raw, '\n'), 0o600)
}
