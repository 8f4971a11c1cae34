package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/guest-agent/internal/secrets"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
)

// Table is the program table as data: the programs boot supervises and the
// checks health runs. The box's own is BoxTable; tests pass theirs as JSON
// (`boot --table FILE`, supervise.Program's JSON form). Paths are as seen in
// the box; Resolve puts them under the agent's root.
type Table struct {
	Programs []supervise.Program `json:"programs"`
	Checks   []probe.CheckSpec   `json:"checks,omitempty"`
}

// ParseTable decodes a JSON table; unknown fields are refused and errors
// name the file and the field.
func ParseTable(b []byte, file string) (Table, error) {
	var t Table
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Table{}, fmt.Errorf("%s: %w", file, err)
	}
	if dec.More() {
		return Table{}, fmt.Errorf("%s: trailing data after the table", file)
	}
	if err := t.Validate(); err != nil {
		return Table{}, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// Validate checks what can be checked without the root.
func (t Table) Validate() error {
	var errs []error
	for i, p := range t.Programs {
		if err := supervise.Validate(p); err != nil {
			errs = append(errs, fmt.Errorf("programs[%d]: %w", i, err))
		}
	}
	for i, c := range t.Checks {
		if err := c.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("checks[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Resolve turns the table into supervisor programs for the box under
// root: users are looked up in root's passwd and group files, and paths
// (command, directory, log) are placed under root.
func (t Table) Resolve(root string) ([]supervise.Program, error) {
	var out []supervise.Program
	for i, p := range t.Programs {
		if err := supervise.Validate(p); err != nil {
			return nil, fmt.Errorf("programs[%d]: %w", i, err)
		}
		if p.User != "" {
			u, err := passwd.Lookup(root, p.User)
			if err != nil {
				return nil, fmt.Errorf("program %q: user: %w", p.Name, err)
			}
			p.Credential = &supervise.Credential{UID: u.UID, GID: u.GID, Groups: u.Groups}
		}
		if filepath.IsAbs(p.Command[0]) {
			p.Command = append([]string{filepath.Join(root, p.Command[0])}, p.Command[1:]...)
		}
		if p.Dir != "" {
			p.Dir = filepath.Join(root, p.Dir)
		}
		if p.SecretsFile != "" {
			file := filepath.Join(root, p.SecretsFile)
			p.EnvFrom = func() ([]string, error) { return secrets.Load(file) }
		}
		if p.Log.Path != "" {
			p.Log.Path = filepath.Join(root, p.Log.Path)
		}
		out = append(out, p)
	}
	return out, nil
}
