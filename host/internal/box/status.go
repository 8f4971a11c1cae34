package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/health"
)

// The checks the host adds to the agent's report.
const (
	checkMachine  health.Code = "smolvm-machine"
	checkListener health.Code = "loopback-listener"
)

// Status is what `status --json` prints: a health report (it decodes with
// shared/health) with the host's checks merged into its checks, plus the
// machine as `smolvm machine status --json` printed it.
type Status struct {
	health.Report
	Machine     json.RawMessage `json:"machine"`
	HealthError string          `json:"healthError,omitempty"`
}

// Status gathers the machine state, the listener check and, when the box
// runs, the agent's report.
func (b *Box) Status(ctx context.Context) (*Status, error) {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	st := &Status{Machine: m.Raw, Report: health.Report{SchemaVersion: health.SchemaVersion, Time: now,
		Checks: map[health.Code]health.Check{}, Services: []health.Service{}}}
	running := m.State == smolvm.StateRunning
	st.Checks[checkMachine] = hostCheck(running, health.SeverityCritical, "machine "+m.Name+" is "+m.State, now)
	if running {
		lerr := b.listen.CheckLoopback(ctx, b.cfg.SSHPort)
		msg := fmt.Sprintf("SSH port %d listens on loopback only", b.cfg.SSHPort)
		if lerr != nil {
			msg = lerr.Error()
		}
		st.Checks[checkListener] = hostCheck(lerr == nil, health.SeverityCritical, msg, now)
		b.mergeAgentHealth(ctx, st)
	}
	st.Summarize()
	return st, nil
}

// mergeAgentHealth adds the agent's report over the SSH relay.
func (b *Box) mergeAgentHealth(ctx context.Context, st *Status) {
	tr, err := b.sshRelay()
	var r *health.Report
	if err == nil {
		r, err = b.health(ctx, tr)
	}
	if err != nil {
		st.HealthError = err.Error()
		st.Checks["agent"] = hostCheck(false, health.SeverityCritical, "agent unreachable: "+err.Error(), st.Time)
		return
	}
	host := st.Checks
	st.Report = *r
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
func (b *Box) MachineState(ctx context.Context) (string, error) {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if errors.Is(err, errNoMachine) {
		return "missing", nil
	}
	return m.State, err
}

// CheckExecutorListener fails unless Executor's port listens on loopback
// only.
func (b *Box) CheckExecutorListener(ctx context.Context) error {
	if err := b.listen.CheckLoopback(ctx, b.cfg.ExecutorPort); err != nil {
		return fmt.Errorf("refusing to use Executor's port: %w", err)
	}
	return nil
}
