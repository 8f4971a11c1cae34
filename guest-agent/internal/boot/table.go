package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/guest-agent/internal/secrets"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
)

// Table is the program table as data: the programs boot supervises and the
// checks health runs. The box's own is BoxTable; tests pass theirs as JSON
// (`boot --table FILE`).
type Table struct {
	Programs []ProgramSpec     `json:"programs"`
	Checks   []probe.CheckSpec `json:"checks,omitempty"`
}

// ProgramSpec is one program in supervisord's terms. Paths are as seen in
// the box; Resolve puts them under the agent's root.
type ProgramSpec struct {
	Name        string            `json:"name"`
	Command     []string          `json:"command"`
	User        string            `json:"user,omitempty"`
	Directory   string            `json:"directory,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	// SecretsFile names a secrets file (secrets.RootFile's format) read
	// before every start; its variables are added to the environment.
	SecretsFile  string   `json:"secretsfile,omitempty"`
	Priority     int      `json:"priority"`
	AutoStart    bool     `json:"autostart"`
	AutoRestart  string   `json:"autorestart,omitempty"`
	ExitCodes    []int    `json:"exitcodes,omitempty"`
	StartSecs    *float64 `json:"startsecs,omitempty"`
	StartRetries *int     `json:"startretries,omitempty"`
	StopSignal   string   `json:"stopsignal,omitempty"`
	StopWaitSecs *float64 `json:"stopwaitsecs,omitempty"`
	Log          *LogSpec `json:"log,omitempty"`
}

// LogSpec is a program's rotated log.
type LogSpec struct {
	Path     string `json:"path"`
	MaxBytes int64  `json:"maxbytes"`
	Backups  int    `json:"backups"`
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
		if _, err := p.convert(); err != nil {
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

// convert maps the spec to a program, without the user's credential and
// without the root.
func (p ProgramSpec) convert() (supervise.Program, error) {
	out := supervise.Program{
		Name: p.Name, Command: p.Command, User: p.User, Dir: p.Directory, Priority: p.Priority,
		AutoStart: p.AutoStart, AutoRestart: supervise.Restart(p.AutoRestart), ExitCodes: p.ExitCodes,
		StartTime: supervise.DefaultStartTime, StartRetries: supervise.DefaultStartRetries, StopWait: supervise.DefaultStopWait,
	}
	var err error
	if p.StartSecs != nil {
		if out.StartTime, err = seconds("startsecs", *p.StartSecs); err != nil {
			return out, err
		}
	}
	if p.StopWaitSecs != nil {
		if out.StopWait, err = seconds("stopwaitsecs", *p.StopWaitSecs); err != nil {
			return out, err
		}
	}
	if p.StartRetries != nil {
		out.StartRetries = *p.StartRetries
	}
	if p.StopSignal != "" {
		sig, ok := supervise.Signals[p.StopSignal]
		if !ok {
			return out, fmt.Errorf("program %q: stopsignal: unknown signal %q", p.Name, p.StopSignal)
		}
		out.StopSignal = sig
	}
	for k, v := range p.Environment {
		if k == "" || bytes.ContainsAny([]byte(k), "=\x00") || bytes.ContainsRune([]byte(v), 0) {
			return out, fmt.Errorf("program %q: environment: bad variable %q", p.Name, k)
		}
		out.Env = append(out.Env, k+"="+v)
	}
	if p.Log != nil {
		if p.Log.Path == "" || !filepath.IsAbs(p.Log.Path) {
			return out, fmt.Errorf("program %q: log.path: want an absolute path, got %q", p.Name, p.Log.Path)
		}
		out.Log = supervise.Log{Path: p.Log.Path, MaxBytes: p.Log.MaxBytes, Backups: p.Log.Backups}
	}
	return out, supervise.Validate(out)
}

func seconds(field string, s float64) (time.Duration, error) {
	if s < 0 || math.IsNaN(s) || s > 86400 {
		return 0, fmt.Errorf("%s: want 0 to 86400 seconds, got %s", field, strconv.FormatFloat(s, 'g', -1, 64))
	}
	return time.Duration(s * float64(time.Second)), nil
}

// Resolve turns the table into supervisor programs for the box under
// root: users are looked up in root's passwd and group files, and paths
// (command, directory, log) are placed under root.
func (t Table) Resolve(root string) ([]supervise.Program, error) {
	var out []supervise.Program
	for i, spec := range t.Programs {
		p, err := spec.convert()
		if err != nil {
			return nil, fmt.Errorf("programs[%d]: %w", i, err)
		}
		if spec.User != "" {
			u, err := passwd.Lookup(root, spec.User)
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
		if spec.SecretsFile != "" {
			file := filepath.Join(root, spec.SecretsFile)
			p.EnvFrom = func() ([]string, error) { return secrets.Load(file) }
		}
		if p.Log.Path != "" {
			p.Log.Path = filepath.Join(root, p.Log.Path)
		}
		out = append(out, p)
	}
	return out, nil
}
