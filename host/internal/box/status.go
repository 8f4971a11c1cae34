package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// The checks the host adds to the agent's report.
const (
	checkMachine  health.Code = "smolvm-machine"
	checkListener health.Code = "loopback-listener"
	checkJournal  health.Code = "restore-journal"
	checkVMM      health.Code = "vmm-confinement"
	// CheckRelease is the smolvm on PATH: a release outside the table
	// that hermes-box doctor has not qualified fails it (start and
	// restart refuse such a binary).
	CheckRelease health.Code = "smolvm-release"
)

// Status is what `status --json` prints: a health report (it decodes with
// shared/health) with the host's checks merged into its checks, plus the
// machine as `smolvm machine status --json` printed it.
type Status struct {
	health.Report
	// State is the box's state in one word: healthy, degraded, unhealthy,
	// stopped or missing (no machine); status exits with StateExitCode.
	State       string          `json:"state"`
	Box         Summary         `json:"box"`
	Machine     json.RawMessage `json:"machine"`
	HealthError string          `json:"healthError,omitempty"`
	Network     NetworkStatus   `json:"network"`
	// VMM is the running box's VMM confinement, read from the host.
	VMM *smolvm.Confinement `json:"vmm,omitempty"`
	// Drift names the settings the configuration asks for that differ
	// from what the box was created with (which box and network report).
	Drift []string `json:"configDrift,omitempty"`
	// DriftNext is how to apply them, when there are any.
	DriftNext string `json:"configDriftNext,omitempty"`
	// Operation is the command that holds the operation lock, as its
	// holder file records it ("pid N: hermes-box snapshot x (since
	// 03:00:01 UTC)"), while it runs.
	Operation string `json:"operation,omitempty"`
}

// NetworkStatus is the network mode and its last proof (strict, none).
type NetworkStatus struct {
	Mode      string          `json:"mode"`
	Summary   string          `json:"summary"`
	LastProof *netproof.Proof `json:"lastProof,omitempty"`
}

func networkStatus(b *Box) NetworkStatus {
	p, ok, err := netmode.Last(b.cfg.StateDir(), b.cfg.MachineName)
	ns := NetworkStatus{Mode: string(b.cfg.NetworkMode), Summary: netmode.Summary(b.cfg.NetworkMode, p, ok)}
	if err != nil {
		ns.Summary = string(b.cfg.NetworkMode) + ": " + err.Error()
	} else if ok {
		ns.LastProof = &p
	}
	return ns
}

// Summary is the one line `status` prints for a box.
type Summary struct {
	Name          string `json:"name"`
	State         string `json:"state"`
	CPUs          int    `json:"cpus"`
	MemoryMiB     int    `json:"memoryMiB"`
	Ports         []int  `json:"ports"`
	Network       string `json:"network"`
	UptimeSeconds int64  `json:"uptimeSeconds"`
}

// Inspect gathers the machine state, the listener check and, when the box
// runs, the agent's report. The agent is asked at once, while smolvm is
// (the SSH handshake and sshd's session start are most of a status's time,
// the smolvm call and the listener check most of the rest); its answer is
// used only when the machine runs, and the call is cancelled otherwise.
// The pinned host key is checked before anything is sent, so an early dial
// to a port that is not the box's reveals nothing.
func Inspect(ctx context.Context, b *Box) (*Status, error) {
	actx, cancel := context.WithCancel(ctx)
	agent := make(chan agentAnswer, 1)
	go func() { agent <- agentHealth(actx, b) }()
	defer func() { cancel(); <-agent }()
	now := time.Now().UTC()
	st := &Status{Machine: json.RawMessage("null"), Report: health.Report{SchemaVersion: health.SchemaVersion, Time: now,
		Checks: map[health.Code]health.Check{}, Services: []health.Service{}}}
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if errors.Is(err, errNoMachine) && checkInterruptedRestore(b, "") == nil {
		name := b.cfg.MachineName
		st.Checks[checkMachine] = hostCheck(false, health.SeverityCritical, "machine "+name+" does not exist (run hermes-box init first)", now)
		st.Summarize()
		st.State, st.Box = StateMissing, Summary{Name: name, State: StateMissing, Ports: []int{}, Network: string(b.cfg.NetworkMode)}
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	st.Machine = m.Raw
	if c, ok := releaseCheck(ctx, b, now); !ok {
		st.Checks[CheckRelease] = c
	}
	running := m.State == smolvm.StateRunning
	st.Checks[checkMachine] = hostCheck(running, health.SeverityCritical, "machine "+m.Name+" is "+m.State, now)
	if safety, err := backup.Interrupted(b.cfg.StateDir()); err != nil || safety != "" {
		msg := fmt.Sprintf("an interrupted restore left the original machine in %s; `hermes-box restore %s` brings it back", safety, safety)
		if err != nil {
			msg = "reading the journal of an interrupted restore: " + err.Error()
		}
		st.Checks[checkJournal] = hostCheck(false, health.SeverityCritical, msg, now)
	}
	if running {
		lerr := b.listen.CheckLoopback(ctx, b.cfg.SSHPort)
		msg := fmt.Sprintf("SSH port %d listens on loopback only", b.cfg.SSHPort)
		if lerr != nil {
			msg = lerr.Error()
		}
		st.Checks[checkListener] = hostCheck(lerr == nil, health.SeverityCritical, msg, now)
		vmm := b.vm.VMMConfinement(m)
		st.VMM = &vmm
		st.Checks[checkVMM] = vmmCheck(vmm, now)
		a := <-agent
		agent <- a // for the deferred receive
		mergeAgentHealth(st, a)
	}
	st.Network = networkStatus(b)
	if st.Drift = Drift(b); len(st.Drift) > 0 {
		st.DriftNext = DriftNext(b)
	}
	st.Summarize()
	st.State = string(st.Status)
	if !running {
		st.State = StateStopped
		if m.State != smolvm.StateStopped {
			st.State = m.State
		}
	}
	if st.Operation = operationInProgress(b); st.Operation != "" && st.State != StateHealthy {
		st.State = StateBusy
	}
	st.Box = summary(b, m, st)
	return st, nil
}

// vmmCheck is the running box's VMM confinement as read from the host's
// /proc: critical when it is missing though asked for, a warning when the
// configuration turned it off.
func vmmCheck(c smolvm.Confinement, now time.Time) health.Check {
	sev := health.SeverityCritical
	if c.State == smolvm.ConfinementOff {
		sev = health.SeverityWarning
	}
	return hostCheck(c.State == smolvm.ConfinementConfined || c.State == smolvm.ConfinementNotApplicable, sev, c.Detail, now)
}

// summary is the box's line: what smolvm says of the machine, the ports
// it publishes and the guest's uptime.
func summary(b *Box, m smolvm.Machine, st *Status) Summary {
	s := Summary{Name: m.Name, State: st.State, CPUs: m.CPUs, MemoryMiB: m.MemoryMiB, Ports: []int{b.cfg.SSHPort},
		Network: string(b.cfg.NetworkMode)}
	if b.cfg.ExecutorEnabled {
		s.Ports = append(s.Ports, b.cfg.ExecutorPort)
	}
	if !m.Network {
		s.Network = "off"
	}
	if st.State != StateStopped {
		s.UptimeSeconds = st.System.UptimeSeconds
	}
	return s
}

// agentAnswer is the agent's report or why there is none.
type agentAnswer struct {
	report *health.Report
	err    error
	audit  *health.Check // the host's check of the audit chain
}

// agentHealth asks the agent for its report over the SSH relay and checks
// its audit chain beside it: two sessions on one connection, since a
// handshake and sshd's start of a connection cost more than a session.
func agentHealth(ctx context.Context, b *Box) agentAnswer {
	tr, err := sshRelay(b)
	if err != nil {
		return agentAnswer{err: err}
	}
	c, err := tr.Dial(ctx)
	if err != nil {
		return agentAnswer{err: err}
	}
	defer c.Close()
	audit := make(chan health.Check, 1)
	go func() {
		// Every status records the audit chain's head. An audit log whose
		// verdict comes before its end has its session stopped; the health
		// call's session on the same connection goes on.
		audit <- anchorAudit(ctx, b, c, time.Now().UTC())
	}()
	r, err := healthOf(ctx, b, c)
	check := <-audit
	if err != nil {
		return agentAnswer{err: err}
	}
	return agentAnswer{report: r, audit: &check}
}

// mergeAgentHealth adds the agent's report to st, the host's checks over
// the agent's.
func mergeAgentHealth(st *Status, a agentAnswer) {
	if a.err != nil {
		st.HealthError = a.err.Error()
		msg := "agent unreachable: " + a.err.Error()
		if next := userr.Hint(a.err); next != "" {
			// A box that did not answer says what to run next.
			msg += " (next: " + next + ")"
		}
		st.Checks["agent"] = hostCheck(false, health.SeverityCritical, msg, st.Time)
		return
	}
	host := st.Checks
	if a.audit != nil {
		host[checkAudit] = *a.audit
	}
	st.Report = *a.report
	if st.Checks == nil {
		st.Checks = map[health.Code]health.Check{}
	}
	for code, c := range host {
		st.Checks[code] = c
	}
}

func hostCheck(ok bool, sev health.Severity, msg string, now time.Time) health.Check {
	c := health.Check{Status: health.StatusHealthy, Severity: sev, Message: msg, Since: now}
	if !ok {
		c.Status = health.StatusUnhealthy
	}
	return c
}

// MachineState is the box's smolvm state, "missing" when there is none.
func MachineState(ctx context.Context, b *Box) (string, error) {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if errors.Is(err, errNoMachine) {
		return "missing", nil
	}
	return m.State, err
}

// CheckExecutorListener fails unless Executor's port listens on loopback
// only, and only the box's VMM (or a process it started) holds it: the API
// key goes to the box, never to whatever else took the port.
func CheckExecutorListener(ctx context.Context, b *Box) error {
	if err := b.listen.CheckLoopback(ctx, b.cfg.ExecutorPort); err != nil {
		return fmt.Errorf("refusing to use Executor's port: %w", err)
	}
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.PID == nil || m.State != smolvm.StateRunning {
		return fmt.Errorf("refusing to use Executor's port: smolvm reports no VMM process of %s (%s)", m.Name, m.State)
	}
	if err := b.listen.CheckOwner(ctx, b.cfg.ExecutorPort, *m.PID); err != nil {
		return fmt.Errorf("refusing to use Executor's port: %w", err)
	}
	return nil
}

// StateRunning is the machine state of a running box (MachineState).
const StateRunning = smolvm.StateRunning

// releaseCheck is the check of the smolvm release on PATH (one `smolvm
// --version`): a warning naming hermes-box doctor when start would refuse
// it; ok when the release is driven.
func releaseCheck(ctx context.Context, b *Box, now time.Time) (health.Check, bool) {
	err := checkSmolvmVersion(ctx, b)
	if err == nil {
		return health.Check{}, true
	}
	msg := err.Error() + "; start and restart refuse it: hermes-box doctor qualifies this binary on this host"
	if hint := userr.Hint(err); hint != "" {
		msg = err.Error() + "; start and restart refuse it (" + hint + ")"
	}
	return hostCheck(false, health.SeverityWarning, msg, now), false
}
