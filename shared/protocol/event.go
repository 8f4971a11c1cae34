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

// Known reports whether t is one of the event types above; the host drops
// an event of any other type.
func (t EventType) Known() bool {
	switch t {
	case EventLog, EventProgress, EventStep, EventWarning:
		return true
	}
	return false
}

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

// Known reports whether l is one of the levels above.
func (l Level) Known() bool {
	switch l {
	case LevelDebug, LevelInfo, LevelWarn, LevelError:
		return true
	}
	return false
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

// Known reports whether s is one of the states above.
func (s StepState) Known() bool {
	switch s {
	case StepStarted, StepDone, StepSkipped, StepFailed:
		return true
	}
	return false
}

// The names of an Event's Fields. The agent sets its fields with these
// constants and the host keeps exactly the names in EventFields, so a field
// the agent adds is one the host passes on (guest-agent's
// TestEventFieldsAreShared fails on a field name outside the list).
const (
	// FieldChanged and FieldChanges are provision's step outcome: whether
	// the step changed the box, and how many changes it made.
	FieldChanged = "changed"
	FieldChanges = "changes"
	// FieldTimeout is the time limit of a command provision runs.
	FieldTimeout = "timeout"
	// FieldSHA256, FieldStatus and FieldURL describe an artifact provision
	// fetched and verified.
	FieldSHA256 = "sha256"
	FieldStatus = "status"
	FieldURL    = "url"
	// FieldBlob is the digest of the blob an image pull is downloading.
	FieldBlob = "blob"
	// FieldSource marks an event the host made of a raw stderr line.
	FieldSource = "source"
	// FieldError is a failed step's reason, which the host moves out of
	// its message.
	FieldError = "error"
)

// EventFields are the field names an event may carry on its way from the
// agent to a person; the host drops any other.
var EventFields = []string{FieldChanged, FieldChanges, FieldTimeout, FieldSHA256, FieldStatus, FieldURL, FieldBlob,
	FieldSource, FieldError}

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
