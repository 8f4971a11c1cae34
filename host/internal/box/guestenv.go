package box

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/secrets"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// startSecrets resolves the box's mapped secrets before it starts, so a
// missing host variable refuses the start and names it. Other machines
// (a restore's candidate) get none: ok is false.
func startSecrets(b *Box, name string) (s protocol.Secrets, ok bool, err error) {
	if name != b.cfg.MachineName || len(b.cfg.Secrets) == 0 {
		return s, false, nil
	}
	s, err = secrets.Resolve(b.cfg.Secrets, os.LookupEnv)
	return s, err == nil, err
}

// startMachine resolves the machine's secrets (startSecrets) and starts it
// as one shown step; the secrets are delivered by afterStart once the
// machine is verified.
func startMachine(ctx context.Context, b *Box, name string) (s protocol.Secrets, deliver bool, err error) {
	if s, deliver, err = startSecrets(b, name); err != nil {
		return s, false, err
	}
	done := b.ui.Step("start", name)
	err = b.vm.Start(ctx, name)
	done(err)
	if h := resourceHint(b, err); h != "" {
		err = userr.WithHint(err, h)
	}
	return s, deliver, err
}

// afterStart runs on a started, verified machine: it delivers the secrets
// (the gateway restarts with them, and is waited for again) and proves
// the network mode. An error means the caller stops the machine.
func afterStart(ctx context.Context, b *Box, name string, port int, s protocol.Secrets, deliver bool) error {
	if !deliver && !netmode.Proven(b.cfg.NetworkMode) {
		return nil
	}
	tr, err := sshRelayTo(b, name, port)
	if err != nil {
		return err
	}
	call := client(b, tr)
	if deliver {
		if err := deliverSecrets(ctx, b, call, s, "the gateway of "+name); err != nil {
			return err
		}
	}
	if netmode.Proven(b.cfg.NetworkMode) {
		plan, err := netprobePlan(b, port)
		if err != nil {
			return err
		}
		done := b.ui.Step("network", "proving network mode "+plan.Mode+" in "+name)
		_, err = netmode.Prove(ctx, call, nil, b.cfg.StateDir(), name, plan, egressDenials(ctx, b, name))
		done(err)
		if err != nil {
			return err
		}
	}
	if !deliver {
		return nil
	}
	return waitGateway(ctx, b, name, tr)
}

// deliverSecrets sends the mapped secrets to the gateway as one shown step
// (to names where they go).
func deliverSecrets(ctx context.Context, b *Box, call secrets.Setter, s protocol.Secrets, to string) error {
	done := b.ui.Step("secrets", fmt.Sprintf("%d mapped secret(s) to %s", len(s.Env), to))
	err := secrets.Deliver(ctx, call, s)
	done(err)
	return err
}

// waitGateway waits, as one shown step, for the box to report healthy with
// the gateway restarted on its secrets.
func waitGateway(ctx context.Context, b *Box, name string, tr relay.Transport) error {
	wctx, cancel := context.WithTimeout(ctx, b.timing.startupDeadline)
	defer cancel()
	done := b.ui.Step("health", "waiting for the gateway with its secrets")
	err := waitHealthy(wctx, b, waiting(b, name, "the gateway of "+name+" to restart with its secrets"), tr)
	done(err)
	return err
}

// netprobePlan is the production plan (the host-loopback alias and the
// gateway probed on the machine's published SSH port), or the test hook's.
func netprobePlan(b *Box, port int) (netproof.Plan, error) {
	plan := netproof.DefaultPlan(string(b.cfg.NetworkMode), b.cfg.NetworkHosts, port)
	path := hookValue(hooks.netprobePlan)
	if path == "" {
		return plan, nil
	}
	b.ui.Warn("%s is set: proving the network mode against test targets", hooks.netprobePlan)
	doc, err := os.ReadFile(path)
	if err != nil {
		return plan, fmt.Errorf("%s: %w", hooks.netprobePlan, err)
	}
	var t netproof.Plan
	if err := json.Unmarshal(doc, &t); err != nil {
		return plan, fmt.Errorf("%s: %w", hooks.netprobePlan, err)
	}
	t.Mode, t.Allowed = plan.Mode, plan.Allowed
	return t, t.Validate()
}

// secretsAfterCutOver delivers the mapped secrets to the box a restore
// started without them, once the cut-over is complete (no journal) and
// the box runs: the backup's code was proven without them first. A
// restore that was interrupted, or that leaves the box stopped, delivers
// nothing; the next start does.
func secretsAfterCutOver(ctx context.Context, b *Box) error {
	name := b.cfg.MachineName
	if !b.drv.owesSecrets(name) || ctx.Err() != nil {
		return nil
	}
	if safety, _ := backup.Interrupted(b.cfg.StateDir()); safety != "" {
		return nil
	}
	if running, err := b.drv.Running(ctx, name); err != nil || !running {
		return err
	}
	s, deliver, err := startSecrets(b, name)
	if err != nil || !deliver {
		return err
	}
	tr, err := sshRelay(b)
	if err != nil {
		return err
	}
	err = deliverSecrets(ctx, b, client(b, tr), s, "the gateway of the restored "+name)
	if err == nil {
		err = waitGateway(ctx, b, name, tr)
	}
	if err != nil {
		return userr.WithHint(fmt.Errorf("the box is restored, but its secrets are not delivered: %w", err), "hermes-box restart")
	}
	return nil
}

// egressDenials reads the machine's egress denials where the release
// records them (machine egress-events, 1.8.1 and later); nil elsewhere.
func egressDenials(ctx context.Context, b *Box, name string) netmode.Denials {
	r, err := b.vm.Release(ctx)
	if err != nil || !r.EgressEvents {
		return nil
	}
	return func(ctx context.Context) ([]smolvm.EgressDenial, error) { return b.vm.EgressDenials(ctx, name) }
}
