package supervise

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Restart says when a program that exited after reaching RUNNING is started
// again, as supervisord's autorestart.
type Restart string

// The restart policies.
const (
	RestartAlways     Restart = "true"
	RestartNever      Restart = "false"
	RestartUnexpected Restart = "unexpected"
)

// Credential is the identity a program runs as.
type Credential struct {
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Log is where a program's stdout and stderr go, rotated by size like
// supervisord's logfile_maxbytes and logfile_backups (path.1 … path.N).
type Log struct {
	Path     string
	MaxBytes int64
	Backups  int
}

// Program is one supervised program, as data. Its JSON form (json.go) is
// the program table's: boot's own table and `boot --table FILE` are
// Programs.
type Program struct {
	Name string
	// Command is the argv; Command[0] is an absolute path or found on the
	// agent's PATH.
	Command []string
	// User names the account for display; Credential is what is applied.
	// A nil Credential runs the program as the agent.
	User       string
	Credential *Credential
	// Dir is the working directory ("" = the agent's).
	Dir string
	// Env is added to the agent's environment, overriding it ("K=V").
	Env []string
	// EnvFrom, when set, is called before every start of the process; its
	// "K=V" entries are added after Env (the box's mapped secrets). An
	// error fails that start.
	EnvFrom func() ([]string, error)
	// SecretsFile names a secrets file in the box (the secrets package's
	// RootFile format) whose variables the program gets at every start:
	// boot's Resolve turns it into EnvFrom under the box's root. The
	// supervisor itself reads only EnvFrom.
	SecretsFile string
	// Priority orders start (ascending) and stop (descending).
	Priority    int
	AutoStart   bool
	AutoRestart Restart
	// ExitCodes are the expected exit codes for RestartUnexpected.
	ExitCodes []int
	// StartTime is how long the program must stay up to count as RUNNING.
	StartTime time.Duration
	// StartRetries is how many times a program that dies in STARTING is
	// retried (with a growing backoff) before it is FATAL.
	StartRetries int
	StopSignal   syscall.Signal
	// StopWait is how long after StopSignal the process group gets SIGKILL.
	StopWait time.Duration
	Log      Log
}

// The defaults, as supervisord's.
const (
	DefaultStartTime    = time.Second
	DefaultStartRetries = 3
	DefaultStopWait     = 10 * time.Second
	DefaultLogMaxBytes  = 50 << 20
	DefaultLogBackups   = 10
)

// withDefaults fills the zero values that have a default.
func (p Program) withDefaults() Program {
	if p.AutoRestart == "" {
		p.AutoRestart = RestartUnexpected
	}
	if p.ExitCodes == nil {
		p.ExitCodes = []int{0}
	}
	if p.StopSignal == 0 {
		p.StopSignal = syscall.SIGTERM
	}
	if p.StopWait == 0 {
		p.StopWait = DefaultStopWait
	}
	if p.Log.Path != "" && p.Log.MaxBytes == 0 {
		p.Log.MaxBytes = DefaultLogMaxBytes
	}
	return p
}

// Validate checks a program as New would, with defaults applied; errors
// name the program and the field.
func Validate(p Program) error { return p.withDefaults().validate() }

// validate checks one program; errors name the program and the field.
func (p Program) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("program %q: %s: %s", p.Name, field, fmt.Sprintf(format, args...)))
	}
	if !validName(p.Name) {
		bad("name", "must be 1-64 letters, digits, '-', '_' or '.', not starting with '.' or '-'")
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		bad("command", "is empty")
	}
	if !slices.Contains([]Restart{RestartAlways, RestartNever, RestartUnexpected}, p.AutoRestart) {
		bad("autorestart", "want true, false or unexpected, got %q", p.AutoRestart)
	}
	for _, c := range p.ExitCodes {
		if c < 0 || c > 255 {
			bad("exitcodes", "%d is not an exit code (0-255)", c)
		}
	}
	if p.StartTime < 0 || p.StopWait < 0 {
		bad("startsecs/stopwaitsecs", "must not be negative")
	}
	if p.StartRetries < 0 {
		bad("startretries", "must not be negative")
	}
	for _, kv := range p.Env {
		if k, v, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(k+v, 0) {
			bad("environment", "bad variable %q", k)
		}
	}
	if p.Log.Path != "" && !filepath.IsAbs(p.Log.Path) {
		bad("log.path", "want an absolute path, got %q", p.Log.Path)
	}
	if p.Log.Path != "" && (p.Log.MaxBytes < 0 || p.Log.Backups < 0) {
		bad("log", "maxbytes and backups must not be negative")
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[0] == '-' || s == "all" {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Signals maps the stop signal names a program table may use.
var Signals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "HUP": syscall.SIGHUP,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

// signalName is the short name of sig, e.g. "TERM".
func signalName(sig syscall.Signal) string {
	for n, s := range Signals {
		if s == sig {
			return n
		}
	}
	return fmt.Sprintf("signal %d", int(sig))
}
