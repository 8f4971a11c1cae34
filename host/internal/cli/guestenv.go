package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/secrets"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// envTestNetprobePlan names a JSON netproof.Plan whose targets replace the
// production ones (tests must not probe outside addresses); mode and
// allowed hosts still come from the configuration.
const envTestNetprobePlan = "HBX_TEST_NETPROBE_PLAN"

// startSecrets resolves the box's mapped secrets before it starts, so a
// missing host variable refuses the start and names it. Other machines
// (a restore's candidate) get none: ok is false.
func (a *app) startSecrets(name string) (s protocol.Secrets, ok bool, err error) {
	if name != a.cfg.MachineName || len(a.cfg.Secrets) == 0 {
		return s, false, nil
	}
	s, err = secrets.Resolve(a.cfg.Secrets, os.LookupEnv)
	return s, err == nil, err
}

// afterStart runs on a started, verified machine: it delivers the secrets
// (the gateway restarts with them, and is waited for again) and proves
// the network mode. An error means the caller stops the machine.
func (a *app) afterStart(ctx context.Context, name string, port int, s protocol.Secrets, deliver bool) error {
	if !deliver && !netmode.Proven(a.cfg.NetworkMode) {
		return nil
	}
	tr, err := a.sshRelayTo(name, port)
	if err != nil {
		return err
	}
	if deliver {
		done := a.ui.Step("secrets", fmt.Sprintf("%d mapped secret(s) to the gateway of %s", len(s.Env), name))
		err = secrets.Deliver(ctx, tr, s, a.ui.Event)
		done(err)
		if err != nil {
			return err
		}
	}
	if netmode.Proven(a.cfg.NetworkMode) {
		plan, err := a.netprobePlan(port)
		if err != nil {
			return err
		}
		done := a.ui.Step("network", "proving network mode "+plan.Mode+" in "+name)
		_, err = netmode.Prove(ctx, tr, nil, a.cfg.StateDir(), name, plan, a.ui.Event)
		done(err)
		if err != nil {
			return err
		}
	}
	if !deliver {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, a.timing.startupDeadline)
	defer cancel()
	done := a.ui.Step("health", "waiting for the gateway with its secrets")
	err = a.waitHealthy(wctx, tr)
	done(err)
	return err
}

// netprobePlan is the production plan (the host-loopback alias and the
// gateway probed on the machine's published SSH port), or the test hook's.
func (a *app) netprobePlan(port int) (netproof.Plan, error) {
	plan := netproof.DefaultPlan(string(a.cfg.NetworkMode), a.cfg.NetworkHosts, port)
	path := os.Getenv(envTestNetprobePlan)
	if path == "" {
		return plan, nil
	}
	a.ui.Warn("%s is set: proving the network mode against test targets", envTestNetprobePlan)
	b, err := os.ReadFile(path)
	if err != nil {
		return plan, fmt.Errorf("%s: %w", envTestNetprobePlan, err)
	}
	var t netproof.Plan
	if err := json.Unmarshal(b, &t); err != nil {
		return plan, fmt.Errorf("%s: %w", envTestNetprobePlan, err)
	}
	t.Mode, t.Allowed = plan.Mode, plan.Allowed
	return t, t.Validate()
}
