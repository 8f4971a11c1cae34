package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/shared/health"
)

// healthTimeout bounds asking a running boot for its services and checks.
const healthTimeout = 10 * time.Second

// addServiceHealth adds every supervised service and the service checks
// from a running boot. Without one the report still comes out: no
// services, and a failed supervisor check saying why.
func addServiceHealth(ctx context.Context, e *env, r *health.Report) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	resp, err := control.Call(ctx, control.Socket(e.root), control.Request{Op: control.OpHealth})
	sup := health.Check{Status: health.StatusHealthy, Severity: health.SeverityCritical, Since: r.Time}
	if err != nil {
		sup.Status, sup.Message = health.StatusUnhealthy, err.Error()
		r.Checks[health.CheckSupervisor] = sup
		r.Summarize()
		return
	}
	var notRunning []string
	for _, s := range resp.Services {
		r.Services = append(r.Services, s.Service)
		if s.State != health.ServiceRunning {
			notRunning = append(notRunning, fmt.Sprintf("%s %s", s.Name, s.State))
		}
	}
	sup.Message = fmt.Sprintf("supervising %d services", len(resp.Services))
	if len(notRunning) > 0 {
		sup.Status, sup.Severity = health.StatusDegraded, health.SeverityWarning
		sup.Message += fmt.Sprintf("; not running: %v", notRunning)
	}
	r.Checks[health.CheckSupervisor] = sup
	for code, c := range resp.Checks {
		r.Checks[code] = c
	}
	r.Summarize()
}
