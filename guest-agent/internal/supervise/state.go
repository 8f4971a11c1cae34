package supervise

import (
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

// State is a program's state; the names are supervisord's.
type State = health.ServiceState

// The states.
const (
	Stopped  = health.ServiceStopped
	Starting = health.ServiceStarting
	Running  = health.ServiceRunning
	Backoff  = health.ServiceBackoff
	Stopping = health.ServiceStopping
	Exited   = health.ServiceExited
	Fatal    = health.ServiceFatal
)

// running reports whether a process exists in state s.
func running(s State) bool { return s == Starting || s == Running || s == Stopping }

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, or 128+signal when killed by a signal.
	Code int
	// Signal is the signal's short name when killed by one.
	Signal string
	// Expected reports whether Code is one of the program's exit codes.
	Expected bool
	Time     time.Time
}

func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by SIG" + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Status is a snapshot of one program.
type Status struct {
	Name     string
	State    State
	PID      int
	Started  time.Time
	Uptime   time.Duration
	Restarts int
	LastExit *Exit
	// Error is the last spawn error, if any.
	Error    string
	Priority int
}

// Description is supervisorctl's one-line summary of the status.
func (s Status) Description() string {
	switch {
	case s.State == Running:
		return fmt.Sprintf("pid %d, uptime %s", s.PID, formatUptime(s.Uptime))
	case running(s.State):
		return fmt.Sprintf("pid %d", s.PID)
	case s.Error != "" && (s.State == Backoff || s.State == Fatal):
		return s.Error
	case s.LastExit != nil:
		return fmt.Sprintf("%s, %s", s.LastExit.Time.Format("Jan 02 15:04:05"), s.LastExit)
	}
	return "not started"
}

func formatUptime(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	out := fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	if days > 0 {
		out = fmt.Sprintf("%d days, %s", days, out)
	}
	return out
}

// Health converts the status to the health report's shape.
func (s Status) Health() health.Service {
	h := health.Service{Name: s.Name, State: s.State, Restarts: s.Restarts}
	if running(s.State) {
		h.PID = s.PID
		h.UptimeSeconds = int64(s.Uptime / time.Second)
	}
	if s.LastExit != nil {
		code := s.LastExit.Code
		h.LastExit = &code
	}
	return h
}
