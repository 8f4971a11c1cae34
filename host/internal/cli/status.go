package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// The checks the host adds to the agent's report.
const (
	checkMachine  health.Code = "smolvm-machine"
	checkListener health.Code = "loopback-listener"
)

// boxStatus is what `status --json` prints: a health report (it decodes
// with shared/health) with the host's checks merged into its checks, plus
// the machine as `smolvm machine status --json` printed it.
type boxStatus struct {
	health.Report
	Machine     json.RawMessage `json:"machine"`
	HealthError string          `json:"healthError,omitempty"`
	Network     networkStatus   `json:"network"`
}

// networkStatus is the network mode and its last proof (strict, none).
type networkStatus struct {
	Mode      string          `json:"mode"`
	Summary   string          `json:"summary"`
	LastProof *netproof.Proof `json:"lastProof,omitempty"`
}

func (a *app) networkStatus() networkStatus {
	p, ok, err := netmode.Last(a.cfg.StateDir())
	ns := networkStatus{Mode: string(a.cfg.NetworkMode), Summary: netmode.Summary(a.cfg.NetworkMode, p, ok)}
	if err != nil {
		ns.Summary = string(a.cfg.NetworkMode) + ": " + err.Error()
	} else if ok {
		ns.LastProof = &p
	}
	return ns
}

func newStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the machine's state, the listener check and the agent's health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := newApp(cmd)
			if err != nil {
				return err
			}
			st, err := a.status(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(a, st)
		},
	}
	cmd.Flags().Bool("json", false, "print the status as JSON (a shared/health report plus the machine)")
	return cmd
}

// status gathers the machine state, the listener check and, when the box
// runs, the agent's report.
func (a *app) status(ctx context.Context) (*boxStatus, error) {
	m, err := a.machineState(ctx, a.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	st := &boxStatus{Machine: m.Raw, Report: health.Report{SchemaVersion: health.SchemaVersion, Time: now,
		Checks: map[health.Code]health.Check{}, Services: []health.Service{}}}
	running := m.State == smolvm.StateRunning
	st.Checks[checkMachine] = hostCheck(running, health.SeverityCritical, "machine "+m.Name+" is "+m.State, now)
	if running {
		lerr := a.listen.CheckLoopback(ctx, a.cfg.SSHPort)
		msg := fmt.Sprintf("SSH port %d listens on loopback only", a.cfg.SSHPort)
		if lerr != nil {
			msg = lerr.Error()
		}
		st.Checks[checkListener] = hostCheck(lerr == nil, health.SeverityCritical, msg, now)
		a.mergeAgentHealth(ctx, st)
	}
	st.Network = a.networkStatus()
	st.Summarize()
	return st, nil
}

// mergeAgentHealth adds the agent's report over the SSH relay.
func (a *app) mergeAgentHealth(ctx context.Context, st *boxStatus) {
	tr, err := a.sshRelay()
	var r *health.Report
	if err == nil {
		r, err = a.health(ctx, tr)
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

func printStatus(a *app, st *boxStatus) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "box\t%s\t%s\n", a.cfg.MachineName, st.Status)
	fmt.Fprintf(tw, "  network\t%s\t%s\n", st.Network.Mode, st.Network.Summary)
	codes := make([]string, 0, len(st.Checks))
	for c := range st.Checks {
		codes = append(codes, string(c))
	}
	slices.Sort(codes)
	for _, c := range codes {
		ch := st.Checks[health.Code(c)]
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c, ch.Status, ch.Message)
	}
	for _, s := range st.Services {
		fmt.Fprintf(tw, "  service %s\t%s\tpid %d, %d restarts\n", s.Name, s.State, s.PID, s.Restarts)
	}
	return tw.Flush()
}
