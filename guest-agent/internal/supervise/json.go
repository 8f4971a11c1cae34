package supervise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// programJSON is a Program's wire form in supervisord's terms (a program
// table of `boot --table`, the fake smolvm's boot table): seconds as
// numbers, the environment as a map, the signal by name. The credential is
// never part of it; it is resolved from User where the program runs.
type programJSON struct {
	Name         string            `json:"name"`
	Command      []string          `json:"command"`
	User         string            `json:"user,omitempty"`
	Directory    string            `json:"directory,omitempty"`
	Environment  map[string]string `json:"environment,omitempty"`
	Priority     int               `json:"priority"`
	AutoStart    bool              `json:"autostart"`
	AutoRestart  string            `json:"autorestart,omitempty"`
	ExitCodes    []int             `json:"exitcodes,omitempty"`
	StartSecs    *float64          `json:"startsecs,omitempty"`
	StartRetries *int              `json:"startretries,omitempty"`
	StopSignal   string            `json:"stopsignal,omitempty"`
	StopWaitSecs *float64          `json:"stopwaitsecs,omitempty"`
	Log          *logJSON          `json:"log,omitempty"`
}

type logJSON struct {
	Path     string `json:"path"`
	MaxBytes int64  `json:"maxbytes"`
	Backups  int    `json:"backups"`
}

// MarshalJSON writes p in its wire form.
func (p Program) MarshalJSON() ([]byte, error) {
	start, wait := p.StartTime.Seconds(), p.StopWait.Seconds()
	retries := p.StartRetries
	j := programJSON{Name: p.Name, Command: p.Command, User: p.User, Directory: p.Dir, Priority: p.Priority,
		AutoStart: p.AutoStart, AutoRestart: string(p.AutoRestart), ExitCodes: p.ExitCodes,
		StartSecs: &start, StartRetries: &retries, StopWaitSecs: &wait}
	if p.StopSignal != 0 {
		j.StopSignal = signalName(p.StopSignal)
	}
	if len(p.Env) > 0 {
		j.Environment = map[string]string{}
		for _, kv := range p.Env {
			k, v, _ := strings.Cut(kv, "=")
			j.Environment[k] = v
		}
	}
	if p.Log.Path != "" {
		j.Log = &logJSON{Path: p.Log.Path, MaxBytes: p.Log.MaxBytes, Backups: p.Log.Backups}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads p from its wire form, refusing unknown fields, with
// supervisord's defaults for what it leaves out. Validate checks the rest.
func (p *Program) UnmarshalJSON(b []byte) error {
	var j programJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	out := Program{
		Name: j.Name, Command: j.Command, User: j.User, Dir: j.Directory, Priority: j.Priority,
		AutoStart: j.AutoStart, AutoRestart: Restart(j.AutoRestart), ExitCodes: j.ExitCodes,
		StartTime: DefaultStartTime, StartRetries: DefaultStartRetries, StopWait: DefaultStopWait,
	}
	var err error
	if j.StartSecs != nil {
		if out.StartTime, err = seconds(j.Name, "startsecs", *j.StartSecs); err != nil {
			return err
		}
	}
	if j.StopWaitSecs != nil {
		if out.StopWait, err = seconds(j.Name, "stopwaitsecs", *j.StopWaitSecs); err != nil {
			return err
		}
	}
	if j.StartRetries != nil {
		out.StartRetries = *j.StartRetries
	}
	if j.StopSignal != "" {
		sig, ok := Signals[j.StopSignal]
		if !ok {
			return fmt.Errorf("program %q: stopsignal: unknown signal %q", j.Name, j.StopSignal)
		}
		out.StopSignal = sig
	}
	if out.Env, err = environ(j.Name, j.Environment); err != nil {
		return err
	}
	if j.Log != nil {
		if j.Log.Path == "" || !filepath.IsAbs(j.Log.Path) {
			return fmt.Errorf("program %q: log.path: want an absolute path, got %q", j.Name, j.Log.Path)
		}
		out.Log = Log{Path: j.Log.Path, MaxBytes: j.Log.MaxBytes, Backups: j.Log.Backups}
	}
	*p = out
	return nil
}

func seconds(name, field string, s float64) (time.Duration, error) {
	if s < 0 || math.IsNaN(s) || s > 86400 {
		return 0, fmt.Errorf("program %q: %s: want 0 to 86400 seconds, got %s", name, field, strconv.FormatFloat(s, 'g', -1, 64))
	}
	return time.Duration(s * float64(time.Second)), nil
}

// environ turns the wire form's map into "K=V" entries, sorted.
func environ(name string, m map[string]string) ([]string, error) {
	var out []string
	for k, v := range m {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("program %q: environment: bad variable %q", name, k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// EnvValue returns the value of key in p's environment.
func (p Program) EnvValue(key string) (string, bool) {
	for _, kv := range p.Env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v, true
		}
	}
	return "", false
}
