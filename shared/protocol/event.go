package protocol

import "time"

// EventType says what an Event is about.
type EventType string

// The event types an agent may send.
const (
	// EventLog is a log line of the agent or of a command it runs.
	EventLog EventType = "log"
	// EventProgress reports progress of a long step.
	EventProgress EventType = "progress"
	// EventStep marks the start or end of a named step.
	EventStep EventType = "step"
	// EventWarning is something the user should read even on success.
	EventWarning EventType = "warning"
)

// Level is the severity of an Event.
type Level string

// The levels, in increasing order.
const (
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// rank orders levels; unknown levels rank as info.
func (l Level) rank() int {
	switch l {
	case LevelDebug:
		return 0
	case LevelWarn:
		return 2
	case LevelError:
		return 3
	default:
		return 1
	}
}

// Enabled reports whether an event at level l passes a minimum level.
func (l Level) Enabled(minimum Level) bool { return l.rank() >= minimum.rank() }

// StepState is the state carried by an EventStep.
type StepState string

// The states of a step.
const (
	StepStarted StepState = "started"
	StepDone    StepState = "done"
	StepSkipped StepState = "skipped"
	StepFailed  StepState = "failed"
)

// Event is one JSON line on the agent's stderr.
type Event struct {
	Time    time.Time `json:"time"`
	Type    EventType `json:"type"`
	Level   Level     `json:"level"`
	Message string    `json:"message"`
	// Step names the step an event belongs to, if any.
	Step string `json:"step,omitempty"`
	// State is set on EventStep.
	State StepState `json:"state,omitempty"`
	// Progress is set on EventProgress.
	Progress *Progress `json:"progress,omitempty"`
	// Fields carries extra structured attributes (never secrets).
	Fields map[string]string `json:"fields,omitempty"`
}

// Progress is how far a step has come. Total is 0 when unknown.
type Progress struct {
	Current int64  `json:"current"`
	Total   int64  `json:"total,omitempty"`
	Unit    string `json:"unit,omitempty"`
}
