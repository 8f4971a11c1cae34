package supervise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// programJSON is a Program's JSON form, the program table's wire format
// (`boot --table FILE`): supervisord's field names, durations in seconds,
// the stop signal by name, the environment as an object. Credential and
// EnvFrom are not part of it: boot derives them from user and secretsfile.
type programJSON struct {
	Name         string            `json:"name"`
	Command      []string          `json:"command"`
	User         string            `json:"user,omitempty"`
	Directory    string            `json:"directory,omitempty"`
	Environment  map[string]string `json:"environment,omitempty"`
	SecretsFile  string            `json:"secretsfile,omitempty"`
	Priority     int               `json:"priority"`
	AutoStart    bool              `json:"autostart"`
	AutoRestart  Restart           `json:"autorestart,omitempty"`
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

// MarshalJSON writes the program in the table's form. Every duration and
// the retry count are written, so a program read back is the same program.
func (p Program) MarshalJSON() ([]byte, error) {
	start, stop, retries := p.StartTime.Seconds(), p.StopWait.Seconds(), p.StartRetries
	out := programJSON{
		Name: p.Name, Command: p.Command, User: p.User, Directory: p.Dir, SecretsFile: p.SecretsFile,
		Priority: p.Priority, AutoStart: p.AutoStart, AutoRestart: p.AutoRestart, ExitCodes: p.ExitCodes,
		StartSecs: &start, StartRetries: &retries, StopWaitSecs: &stop,
	}
	if p.StopSignal != 0 {
		out.StopSignal = signalName(p.StopSignal)
	}
	for _, kv := range p.Env {
		k, v, _ := strings.Cut(kv, "=")
		if out.Environment == nil {
			out.Environment = map[string]string{}
		}
		out.Environment[k] = v
	}
	if p.Log != (Log{}) {
		out.Log = &logJSON{Path: p.Log.Path, MaxBytes: p.Log.MaxBytes, Backups: p.Log.Backups}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the table's form: unknown fields are refused, absent
// startsecs, startretries and stopwaitsecs take supervisord's defaults, and
// errors name the program and the field. The environment is sorted by name.
func (p *Program) UnmarshalJSON(b []byte) error {
	var in programJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	out := Program{
		Name: in.Name, Command: in.Command, User: in.User, Dir: in.Directory, SecretsFile: in.SecretsFile,
		Priority: in.Priority, AutoStart: in.AutoStart, AutoRestart: in.AutoRestart, ExitCodes: in.ExitCodes,
		StartTime: DefaultStartTime, StartRetries: DefaultStartRetries, StopWait: DefaultStopWait,
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("program %q: %s", in.Name, fmt.Sprintf(format, args...))
	}
	var err error
	if in.StartSecs != nil {
		if out.StartTime, err = seconds("startsecs", *in.StartSecs); err != nil {
			return bad("%v", err)
		}
	}
	if in.StopWaitSecs != nil {
		if out.StopWait, err = seconds("stopwaitsecs", *in.StopWaitSecs); err != nil {
			return bad("%v", err)
		}
	}
	if in.StartRetries != nil {
		out.StartRetries = *in.StartRetries
	}
	if in.StopSignal != "" {
		sig, ok := Signals[in.StopSignal]
		if !ok {
			return bad("stopsignal: unknown signal %q", in.StopSignal)
		}
		out.StopSignal = sig
	}
	for _, k := range slices.Sorted(maps.Keys(in.Environment)) {
		v := in.Environment[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return bad("environment: bad variable %q", k)
		}
		out.Env = append(out.Env, k+"="+v)
	}
	if in.Log != nil {
		if !filepath.IsAbs(in.Log.Path) {
			return bad("log.path: want an absolute path, got %q", in.Log.Path)
		}
		out.Log = Log{Path: in.Log.Path, MaxBytes: in.Log.MaxBytes, Backups: in.Log.Backups}
	}
	*p = out
	return nil
}

// seconds is a table's duration: 0 to a day, in seconds.
func seconds(field string, s float64) (time.Duration, error) {
	if s < 0 || math.IsNaN(s) || s > 86400 {
		return 0, fmt.Errorf("%s: want 0 to 86400 seconds, got %s", field, strconv.FormatFloat(s, 'g', -1, 64))
	}
	return time.Duration(s * float64(time.Second)), nil
}
