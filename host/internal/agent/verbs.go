package agent

import (
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Verb is one agent verb as the host calls it: declared once, in Verbs,
// with everything that bounds a call of it.
type Verb struct {
	// Argv is the verb's fixed words; a call appends its arguments.
	Argv []string
	// Args names the arguments a call appends after Argv, in order.
	Args []string
	// Stdin says the call sends input after the request line.
	Stdin bool
	// Result is what stdout carries: a protocol type read whole, or a
	// stream passed on as it comes.
	Result string
	// Stream says stdout is passed on as it comes instead of read whole.
	Stream bool
	// Stdout and Stderr are the most bytes the verb's stdout and its
	// stderr (its events) may carry; past either, the call ends with an
	// error. Stdout 0 is for a follow mode only: no cap, it ends on Ctrl-C.
	Stdout, Stderr int64
	// Deadline bounds the whole call; 0 is for a follow mode only.
	Deadline time.Duration
	// Idle, when set, ends the call once the box shows no progress (no
	// byte of stdout or stderr sent, none of stdin taken) for that long:
	// for the verbs whose deadline is hours, so that a hung box is found
	// in minutes. The agent reports its long silent steps every
	// protocol.HeartbeatEvery.
	Idle time.Duration
}

// Name is the verb's words, as errors name it.
func (v *Verb) Name() string { return strings.Join(v.Argv, " ") }

// Follow reports whether the verb runs until Ctrl-C (no deadline, no cap).
func (v *Verb) Follow() bool { return v.Deadline == 0 }

// The caps the table uses.
const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
	// maxEvents is the stderr of any verb: its events, never its data.
	maxEvents = 4 * mib
	// maxPart is the largest part a snapshot may stream (the configured
	// part cap is checked as the part is written, and is smaller).
	maxPart = 16 << 40
	// maxAuditLog is auditanchor.MaxLog: the audit log the host verifies.
	maxAuditLog = 16 * mib
	// idle is the idle deadline of the long verbs: six heartbeats.
	idle = 6 * protocol.HeartbeatEvery
)

// The verbs the host calls. Each call goes through Client.Call with one of
// them; docs/limits.md's table of caps and deadlines is this one. Version,
// Netcheck, HostKeys and Provision run through smolvm exec directly
// (relay.Exec with Direct): the agent refuses all but version through the
// relay, and version is how the host learns the agent answers at all.
var (
	Health = &Verb{Argv: []string{"health", "--json"}, Result: "health.Report",
		Stdout: mib, Stderr: maxEvents, Deadline: 30 * time.Second}
	HealthDeep = &Verb{Argv: []string{"health", "--json", "--deep"}, Result: "health.Report",
		Stdout: mib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	ServicesStatus = &Verb{Argv: []string{"services", "status", "--json"}, Result: "protocol.ServicesStatus",
		Stdout: mib, Stderr: maxEvents, Deadline: 30 * time.Second}
	ServicesStop = &Verb{Argv: []string{"services", "stop"}, Args: []string{"SERVICE"}, Result: "none",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	ServicesStart = &Verb{Argv: []string{"services", "start"}, Args: []string{"SERVICE"}, Result: "none",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	Logs = &Verb{Argv: []string{"logs"}, Args: []string{"SERVICE", "-n", "LINES"}, Result: "text", Stream: true,
		Stdout: 64 * mib, Stderr: maxEvents, Deadline: time.Minute}
	LogsFollow = &Verb{Argv: []string{"logs"}, Args: []string{"SERVICE", "-n", "LINES", "-f"}, Result: "text", Stream: true,
		Stderr: maxEvents}
	AuditRaw = &Verb{Argv: []string{"audit", "raw"}, Result: "audit log", Stream: true,
		Stdout: maxAuditLog, Stderr: maxEvents, Deadline: 2 * time.Minute}
	// secrets set restarts the gateway (its stop wait, then its start).
	SecretsSet = &Verb{Argv: []string{"secrets", "set"}, Stdin: true, Result: "protocol.SecretsStored",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	// netprobe runs its probes at once, each within the plan's timeout.
	Netprobe = &Verb{Argv: []string{"netprobe"}, Stdin: true, Result: "netproof.Proof",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: time.Minute}
	ExecutorStatus = &Verb{Argv: []string{"executor", "status"}, Result: "protocol.ExecutorStatus",
		Stdout: mib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	ExecutorStatusSizes = &Verb{Argv: []string{"executor", "status", "--sizes"}, Result: "protocol.ExecutorStatus",
		Stdout: mib, Stderr: maxEvents, Deadline: 2 * time.Minute}
	ExecutorRefresh = &Verb{Argv: []string{"executor", "refresh-discovery"}, Result: "protocol.DiscoveryRefresh",
		Stdout: 4 * kib, Stderr: maxEvents, Deadline: 3 * time.Minute}
	ExecutorConnect = &Verb{Argv: []string{"executor", "connect-hermes"}, Stdin: true, Result: "none",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 5 * time.Minute}
	SnapshotWrite = &Verb{Argv: []string{"snapshot", "write"}, Args: []string{"PART"}, Result: "tar stream", Stream: true,
		Stdout: maxPart, Stderr: maxEvents, Deadline: 12 * time.Hour, Idle: idle}
	SnapshotChunks = &Verb{Argv: []string{"snapshot", "chunks"}, Args: []string{"PART"}, Stdin: true, Result: "chunk stream", Stream: true,
		Stdout: maxPart, Stderr: maxEvents, Deadline: 12 * time.Hour, Idle: idle}
	SnapshotApply = &Verb{Argv: []string{"snapshot", "apply"}, Stdin: true, Result: "none",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 12 * time.Hour, Idle: idle}
	Version  = &Verb{Argv: []string{"version"}, Result: "text", Stdout: 4 * kib, Stderr: maxEvents, Deadline: 30 * time.Second}
	Netcheck = &Verb{Argv: []string{"netcheck"}, Args: []string{"[--host NAME]"}, Result: "netcheck.Result (exit 1: not ready)",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 10 * time.Second}
	HostKeys = &Verb{Argv: []string{"hostkeys"}, Result: "protocol.HostKeys",
		Stdout: 64 * kib, Stderr: maxEvents, Deadline: 30 * time.Second}
	Provision = &Verb{Argv: []string{"provision"}, Args: []string{"FLAGS…"}, Result: "none",
		Stdout: mib, Stderr: 16 * mib, Deadline: 2 * time.Hour, Idle: idle}
)

// NetcheckKill is how long a netcheck may run in the builder: smolvm exec
// ends it there after this (--timeout), inside Netcheck's deadline, so
// that a probe stuck in the box does not outlive the host's wait. The
// agent bounds its own DNS lookup at 5 s: a netcheck still running 3 s
// later is an agent that does not answer (NoAnswerError), not a network
// that is not ready.
const NetcheckKill = 8 * time.Second

// Verbs is every verb the host calls.
var Verbs = []*Verb{Health, HealthDeep, ServicesStatus, ServicesStop, ServicesStart, Logs, LogsFollow, AuditRaw,
	SecretsSet, Netprobe, ExecutorStatus, ExecutorStatusSizes, ExecutorRefresh, ExecutorConnect,
	SnapshotWrite, SnapshotChunks, SnapshotApply, Version, Netcheck, HostKeys, Provision}
