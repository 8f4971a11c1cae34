// Package machine keeps the smolvm stand-in's machines. Each machine is a
// directory under the state dir (its `machine data-dir`) holding its record
// (machine.json), a qcow2 disk over the base image or an extracted pack, the
// kernel, the QEMU pid file, the console log and the control sockets; a
// running machine is one daemonised QEMU process.
package machine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// Machine states, as smolvm 1.0.4 names them.
const (
	Created     = "created"
	Running     = "running"
	Stopped     = "stopped"
	Failed      = "failed"
	Unreachable = "unreachable"
)

// Port publishes GuestPort on 127.0.0.1:HostPort.
type Port struct {
	Host  uint16 `json:"host"`
	Guest uint16 `json:"guest"`
}

// SecretRef maps a guest variable to a host variable read at each start and
// exec; values are never stored.
type SecretRef struct {
	Guest string `json:"guest"`
	Host  string `json:"host"`
}

// Record is what the stand-in stores about a machine.
type Record struct {
	Name       string      `json:"name"`
	CreatedAt  int64       `json:"created_at"`
	State      string      `json:"state"`
	PID        int         `json:"pid,omitempty"`
	CPUs       int         `json:"cpus"`
	MemMiB     int         `json:"memory_mib"`
	StorageGB  *uint64     `json:"storage_gb"`
	OverlayGB  *uint64     `json:"overlay_gb"`
	Image      *string     `json:"image"`
	From       string      `json:"from,omitempty"`
	Ports      []Port      `json:"ports"`
	Env        []string    `json:"env"`
	Secrets    []SecretRef `json:"secrets"`
	Net        bool        `json:"network"`
	NetBackend string      `json:"net_backend,omitempty"`
	Entrypoint []string    `json:"entrypoint"`
	Cmd        []string    `json:"cmd"`
	Workdir    string      `json:"workdir,omitempty"`
}

// Store is the state dir.
type Store struct {
	Dir string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidName reports whether name can name a machine.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Open creates the state dir if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, storageError("create state dir", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, storageError("resolve state dir", err)
	}
	return &Store{Dir: abs}, nil
}

// Lock serialises mutating commands across processes (smolvm's state is
// single-writer too). It flocks the state dir itself, so it leaves no file.
func (s *Store) Lock() (unlock func(), err error) {
	f, err := os.Open(s.Dir)
	if err != nil {
		return nil, storageError("lock state dir", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, storageError("lock state dir", err)
	}
	return func() { f.Close() }, nil
}

// DataDir is the machine's directory.
func (s *Store) DataDir(name string) string { return filepath.Join(s.Dir, name) }

func (s *Store) recordPath(name string) string {
	return filepath.Join(s.DataDir(name), "machine.json")
}

// Load reads a machine's record.
func (s *Store) Load(name string) (*Record, error) {
	if !ValidName(name) {
		return nil, notFound(name)
	}
	b, err := os.ReadFile(s.recordPath(name))
	if os.IsNotExist(err) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, storageError("read record", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, storageError("parse "+s.recordPath(name), err)
	}
	return &r, nil
}

// Save writes a machine's record atomically.
func (s *Store) Save(r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return storageError("encode record", err)
	}
	if err := atomicfile.Write(s.recordPath(r.Name), append(b, '\n'), 0o600); err != nil {
		return storageError("write record", err)
	}
	return nil
}

// List returns every machine's record, by name.
func (s *Store) List() ([]*Record, error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, storageError("list state dir", err)
	}
	var out []*Record
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		r, err := s.Load(e.Name())
		if err != nil {
			continue // a machine being created or deleted
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Exists reports whether a machine of that name exists.
func (s *Store) Exists(name string) bool {
	_, err := os.Stat(s.recordPath(name))
	return err == nil
}

func mustDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return nil
}
