package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

// CheckSpec describes one service check as data: exactly one of TCP, HTTP
// and Service is set.
type CheckSpec struct {
	Code     health.Code     `json:"code"`
	Severity health.Severity `json:"severity,omitempty"`
	// TCP is an address that must accept a connection.
	TCP string `json:"tcp,omitempty"`
	// HTTP is a URL that must answer with a 2xx status.
	HTTP string `json:"http,omitempty"`
	// Service is a supervised program that must be RUNNING.
	Service string `json:"service,omitempty"`
}

// Validate checks that the spec is usable.
func (c CheckSpec) Validate() error {
	n := 0
	for _, s := range []string{c.TCP, c.HTTP, c.Service} {
		if s != "" {
			n++
		}
	}
	if c.Code == "" {
		return fmt.Errorf("check: code: is empty")
	}
	if n != 1 {
		return fmt.Errorf("check %q: want exactly one of tcp, http and service", c.Code)
	}
	switch c.Severity {
	case "", health.SeverityInfo, health.SeverityWarning, health.SeverityCritical:
	default:
		return fmt.Errorf("check %q: severity: want info, warning or critical, got %q", c.Code, c.Severity)
	}
	return nil
}

// CheckTimeout bounds each network check.
const CheckTimeout = 3 * time.Second

// RunChecks runs every spec concurrently against the services' states.
func RunChecks(ctx context.Context, specs []CheckSpec, services []health.Service, now time.Time) map[health.Code]health.Check {
	out := make(map[health.Code]health.Check, len(specs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range specs {
		wg.Go(func() {
			c := runCheck(ctx, s, services, now)
			mu.Lock()
			out[s.Code] = c
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func runCheck(ctx context.Context, s CheckSpec, services []health.Service, now time.Time) health.Check {
	c := health.Check{Status: health.StatusHealthy, Severity: s.Severity, Since: now}
	if c.Severity == "" {
		c.Severity = health.SeverityCritical
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	var err error
	switch {
	case s.TCP != "":
		c.Message, err = checkTCP(ctx, s.TCP)
	case s.HTTP != "":
		c.Message, err = checkHTTP(ctx, s.HTTP)
	default:
		c.Message, err = checkService(s.Service, services)
	}
	if err != nil {
		c.Status, c.Message = health.StatusUnhealthy, err.Error()
		if c.Severity == health.SeverityWarning {
			c.Status = health.StatusDegraded
		}
	}
	return c
}

func checkTCP(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("nothing listening on %s: %w", addr, err)
	}
	conn.Close()
	return "listening on " + addr, nil
}

func checkHTTP(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return url + " answered " + resp.Status, nil
}

func checkService(name string, services []health.Service) (string, error) {
	for _, s := range services {
		if s.Name == name {
			if s.State != health.ServiceRunning {
				return "", fmt.Errorf("%s is %s", name, s.State)
			}
			return fmt.Sprintf("%s is RUNNING (pid %d)", name, s.PID), nil
		}
	}
	return "", fmt.Errorf("%s is not supervised", name)
}
