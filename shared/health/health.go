// Package health defines the health report the agent prints on
// `hermes-box-agent health --json` and the host decodes. The report is a
// versioned wire format: golden files in testdata pin its shape.
package health

import (
	"encoding/json"
	"fmt"
	"time"
)

// SchemaVersion is the version of Report's JSON shape.
//
// History of versions:
//
//	1: 2026-11-22: first version.
//	   2026-11-23 (additive, same version): check "gate" and the optional
//	   "gate" object (the approval gate as the installed Hermes resolves it).
const SchemaVersion = 1

// Status is the overall or per-check verdict.
type Status string

// The statuses, from best to worst.
const (
	StatusHealthy   Status = "healthy"
	StatusDegraded  Status = "degraded"
	StatusUnhealthy Status = "unhealthy"
)

// Severity says how much a failed check matters.
type Severity string

// The severities. A failed critical check makes the report unhealthy, a
// failed warning check makes it degraded, info never changes the verdict.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Code identifies a check; codes are stable across versions.
type Code string

// The checks the agent knows.
const (
	CheckWorkspaceDisk Code = "workspace-disk"
	CheckSSHD          Code = "sshd-listening"
	CheckHermesGateway Code = "hermes-gateway"
	CheckExecutor      Code = "executor-api"
	CheckSupervisor    Code = "supervisor"
	// CheckGate is the approval gate installed and active as provisioned:
	// its mechanism, and the effective approval mode read from Hermes itself.
	CheckGate Code = "gate"
	// What provisioning installed, checked cheaply (files) in every report
	// and deeply (the commands run) in init's readiness (added 2026-11-23,
	// schema unchanged: checks is a map of codes).
	CheckHermesVersion Code = "hermes-version"
	CheckHermesExtras  Code = "hermes-messaging-extra"
	CheckNodeNPM       Code = "node-npm"
	CheckTmuxTerminfo  Code = "tmux-terminfo"
	CheckCodexVersion  Code = "codex-version"
	CheckExecutorImage Code = "executor-image"
)

// ServiceState is a supervised program's state, as supervisord names them.
type ServiceState string

// The service states.
const (
	ServiceStopped  ServiceState = "STOPPED"
	ServiceStarting ServiceState = "STARTING"
	ServiceRunning  ServiceState = "RUNNING"
	ServiceBackoff  ServiceState = "BACKOFF"
	ServiceStopping ServiceState = "STOPPING"
	ServiceExited   ServiceState = "EXITED"
	ServiceFatal    ServiceState = "FATAL"
)

// Report is the agent's view of the box's health.
type Report struct {
	SchemaVersion int            `json:"schemaVersion"`
	Time          time.Time      `json:"time"`
	Status        Status         `json:"status"`
	Agent         Agent          `json:"agent"`
	System        System         `json:"system"`
	Checks        map[Code]Check `json:"checks"`
	Services      []Service      `json:"services"`
	// Gate details the "gate" check; absent when the agent did not run it.
	Gate *Gate `json:"gate,omitempty"`
}

// Gate is the approval gate as the installed Hermes reports it.
type Gate struct {
	// HermesVersion and Mechanism come from the pins table row of the
	// installed commit (for example "0.19.0", "smart-plugin").
	HermesVersion string `json:"hermesVersion"`
	Mechanism     string `json:"mechanism"`
	// EffectiveMode is approvals.mode as Hermes' own code normalises it;
	// IntendedMode is what the mechanism needs ("gated", "smart").
	EffectiveMode string `json:"effectiveMode"`
	IntendedMode  string `json:"intendedMode"`
	// Problems lists every way the gate differs from what was provisioned;
	// empty when the check is healthy.
	Problems []string `json:"problems,omitempty"`
}

// Agent describes the agent that wrote the report.
type Agent struct {
	Version       string `json:"version"`
	UptimeSeconds int64  `json:"uptimeSeconds"`
}

// System holds machine-level figures.
type System struct {
	UptimeSeconds int64      `json:"uptimeSeconds"`
	Load          [3]float64 `json:"load"`
	Workspace     Disk       `json:"workspace"`
}

// Disk is the usage of the file system holding Path.
type Disk struct {
	Path       string `json:"path"`
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
}

// Check is the result of one named check.
type Check struct {
	Status   Status    `json:"status"`
	Severity Severity  `json:"severity"`
	Message  string    `json:"message"`
	Since    time.Time `json:"since"`
}

// Service is one supervised program.
type Service struct {
	Name          string       `json:"name"`
	State         ServiceState `json:"state"`
	PID           int          `json:"pid,omitempty"`
	UptimeSeconds int64        `json:"uptimeSeconds,omitempty"`
	Restarts      int          `json:"restarts"`
	LastExit      *int         `json:"lastExit,omitempty"`
}

// Summarize sets r.Status from its checks: any failed critical check makes
// the report unhealthy, any other failed check (warning) degraded.
func (r *Report) Summarize() {
	r.Status = StatusHealthy
	for _, c := range r.Checks {
		if c.Status == StatusHealthy || c.Severity == SeverityInfo {
			continue
		}
		if c.Severity == SeverityCritical {
			r.Status = StatusUnhealthy
			return
		}
		r.Status = StatusDegraded
	}
}

// Decode parses a report and refuses other schema versions and unknown
// statuses, so the host never acts on a report it misreads.
func Decode(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding health report: %w", err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("decoding health report: schema version %d, want %d", r.SchemaVersion, SchemaVersion)
	}
	if err := r.Status.valid(); err != nil {
		return nil, fmt.Errorf("decoding health report: %w", err)
	}
	for code, c := range r.Checks {
		if err := c.Status.valid(); err != nil {
			return nil, fmt.Errorf("decoding health report: check %q: %w", code, err)
		}
	}
	return &r, nil
}

func (s Status) valid() error {
	switch s {
	case StatusHealthy, StatusDegraded, StatusUnhealthy:
		return nil
	}
	return fmt.Errorf("unknown status %q", s)
}
