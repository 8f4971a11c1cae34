package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// ReservedLabels are words a snapshot label may not be: they are (or may
// become) subcommands, so `snapshot list` never takes a backup named
// "list".
var ReservedLabels = []string{"list", "ls", "delete", "rm", "remove", "create", "apply", "restore", "show", "help", "prune"}

// CheckLabel refuses reserved and empty labels.
func CheckLabel(label string) error {
	l := strings.ToLower(strings.TrimSpace(label))
	if l == "" {
		return errors.New("a snapshot label may not be empty")
	}
	if slices.Contains(ReservedLabels, l) {
		return fmt.Errorf("%q is a reserved word, not a snapshot label (reserved: %s); to list backups run `hermes-box backups`",
			label, strings.Join(ReservedLabels, ", "))
	}
	return nil
}

// Entry is one backup in the backups directory, as `hermes-box backups`
// lists it.
type Entry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Label   string    `json:"label"`
	Machine string    `json:"machine"`
	Created time.Time `json:"created"`
	// Size is the bytes of its files; for an incremental backup, the
	// bytes of the files it holds (its parts' contents).
	Size int64 `json:"size"`
	// Added is what the backup added to the backups directory: a v2
	// backup's files, an incremental backup's new chunks (stored size).
	Added int64 `json:"added"`
	// Incremental is a backup whose record names chunks in its machine's
	// chunk store.
	Incremental bool `json:"incremental,omitempty"`
	// Verified is "verified" when every check of Verify passed (with
	// Deep), "complete" when its files and manifest are present (without
	// Deep), else "invalid" with Problem saying why.
	Verified string `json:"verified"`
	Problem  string `json:"problem,omitempty"`
	Legacy   bool   `json:"legacy,omitempty"`
	// Unsigned is a backup without SHA256SUMS.sig (made before backups
	// were signed): restore needs --legacy-backup.
	Unsigned bool `json:"unsigned,omitempty"`
}

// The verified states of an entry.
const (
	StateVerified = "verified"
	StateComplete = "complete"
	StateInvalid  = "invalid"
	// StateUnsigned is an unsigned backup whose checksums all hold.
	StateUnsigned = "unsigned"
)

// Good reports an entry a restore can use.
func (e Entry) Good() bool { return e.Verified != StateInvalid }

// Inventory lists the backups in dir, oldest first. With deep, each is
// fully verified (its signature against key first, then every checksum);
// otherwise its sums, sizes and manifest are checked. Directories that are
// not backups are skipped; temp directories of an unfinished snapshot never
// end in .hermesbox.
func Inventory(ctx context.Context, dir string, deep bool, key ssh.PublicKey) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing backups: %w", err)
	}
	out := []Entry{}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), Suffix) || !de.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, inspect(ctx, filepath.Join(dir, de.Name()), deep, key))
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// inspect describes one backup directory.
func inspect(ctx context.Context, path string, deep bool, key ssh.PublicKey) Entry {
	name := filepath.Base(path)
	e := Entry{Name: name, Path: path, Verified: StateComplete, Unsigned: true}
	e.Machine, e.Label, e.Created = parseName(name)
	for _, f := range append(slices.Clone(Files), FileSums, FileSignature) {
		if fi, err := os.Lstat(filepath.Join(path, f)); err == nil && fi.Mode().IsRegular() {
			e.Size += fi.Size()
			e.Unsigned = e.Unsigned && f != FileSignature
		}
	}
	e.Added = e.Size
	var problem error
	if deep {
		v, err := Verify(ctx, path, Trust{Key: key, LegacyOK: true})
		if err == nil {
			e.Verified, e.Legacy, e.Unsigned = StateVerified, v.Manifest.Legacy(), v.Signer == nil
			if e.Unsigned {
				e.Verified = StateUnsigned
			}
			e.setManifest(v.Manifest)
		}
		problem = err
	} else {
		problem = e.shallow(path)
	}
	if problem != nil {
		e.Verified, e.Problem = StateInvalid, problem.Error()
	}
	return e
}

// shallow checks the sums, that every file is there, and the manifest.
func (e *Entry) shallow(path string) error {
	if _, err := readSums(path); err != nil {
		return err
	}
	for _, f := range Files {
		if fi, err := os.Lstat(filepath.Join(path, f)); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is missing", ErrInvalid, f)
		}
	}
	data, err := readSmall(filepath.Join(path, FileManifest))
	if err != nil {
		return err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return err
	}
	e.Legacy = m.Legacy()
	e.setManifest(m)
	return nil
}

func (e *Entry) setManifest(m Manifest) {
	if m.Machine != "" {
		e.Machine = m.Machine
	}
	if t, err := time.Parse(time.RFC3339, m.Created); err == nil {
		e.Created = t.UTC()
	}
}

// parseName reads <machine>-<YYYYMMDD-HHMMSS>-<label>[-N].hermesbox.
func parseName(name string) (machine, label string, created time.Time) {
	base := strings.TrimSuffix(name, Suffix)
	parts := strings.Split(base, "-")
	for i := 0; i+1 < len(parts); i++ {
		t, err := time.ParseInLocation("20060102-150405", parts[i]+"-"+parts[i+1], time.Local)
		if err != nil || len(parts[i]) != 8 {
			continue
		}
		return strings.Join(parts[:i], "-"), strings.Join(parts[i+2:], "-"), t.UTC()
	}
	return "", base, time.Time{}
}
