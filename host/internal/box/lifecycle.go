package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// Start starts the box and verifies it, under the operation lock.
func (b *Box) Start(ctx context.Context) error {
	return b.interrupted(ctx, "start", b.withLock(func() error { return b.startBox(ctx) }))
}

// Stop stops the box's services, then the machine, under the operation
// lock.
func (b *Box) Stop(ctx context.Context) error {
	return b.interrupted(ctx, "stop", b.withLock(func() error { return b.stopBox(ctx) }))
}

// Restart stops the box, then starts and verifies it, under one lock.
func (b *Box) Restart(ctx context.Context) error {
	return b.interrupted(ctx, "restart", b.withLock(func() error {
		if err := b.stopBoxChecked(ctx, b.checkExecutorWiring); err != nil {
			return err
		}
		return b.startBox(ctx)
	}))
}

// startBox starts the box, or verifies it when it already runs (a failed
// verification of a box that was already running does not stop it).
func (b *Box) startBox(ctx context.Context) error {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := b.checkExecutorWiring(m); err != nil {
		return err
	}
	b.warnDrift()
	if m.State == smolvm.StateRunning {
		b.ui.Info("%s is already running; verifying it", m.Name)
		return b.verifyRunning(ctx)
	}
	if m.State == smolvm.StatePaused || m.State == smolvm.StatePausing {
		return &userr.Error{Err: fmt.Errorf("the box %s is %s (smolvm machine pause froze it); nothing was changed", m.Name, m.State),
			Next: "resume it with: smolvm machine resume --name " + m.Name + " (then hermes-box start verifies it)"}
	}
	if err := b.bootAndVerify(ctx, m.Name); err != nil {
		return err
	}
	b.ui.Info("%s is running and healthy: hermes-box ssh", m.Name)
	return nil
}

// stopBox asks the agent to stop every service (tolerating an agent that
// cannot), then stops the machine.
func (b *Box) stopBox(ctx context.Context) error {
	return b.stopBoxChecked(ctx, func(smolvm.Machine) error { return nil })
}

// stopBoxChecked is stopBox that first runs check on the machine and
// changes nothing when it fails.
func (b *Box) stopBoxChecked(ctx context.Context, check func(smolvm.Machine) error) error {
	m, err := b.machineState(ctx, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if err := check(m); err != nil {
		return err
	}
	if m.State != smolvm.StateRunning && m.State != smolvm.StateUnreachable {
		b.ui.Info("%s is %s; nothing to stop", m.Name, m.State)
		return nil
	}
	if m.State == smolvm.StateRunning {
		b.stopServices(ctx)
	}
	done := b.ui.Step("stop", m.Name)
	err = b.vm.Stop(ctx, m.Name)
	done(err)
	return err
}

// stopServices runs the agent's `services stop all` over the SSH relay. It
// only warns when that fails: the machine stop that follows ends them too.
func (b *Box) stopServices(ctx context.Context) {
	tr, err := b.sshRelay()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
		defer cancel()
		done := b.ui.Step("services-stop", "all services")
		err = b.client(tr).StopService(ctx, "all")
		done(err)
	}
	var exit *agent.ExitError
	if errors.As(err, &exit) && exit.Code == 2 {
		b.ui.Warn("the agent has no services verb; stopping the machine directly")
		return
	}
	if err != nil {
		b.ui.Warn("could not stop the services gracefully (%v); stopping the machine", err)
	}
}

// Destroy stops and deletes the box and the builder, then forgets the
// box's pinned host key, under the operation lock. Images, backups and
// the SSH key are kept. It returns the machines it deleted.
func (b *Box) Destroy(ctx context.Context) (deleted []string, err error) {
	err = b.withLock(func() error { return b.destroy(ctx, &deleted) })
	return deleted, err
}

func (b *Box) destroy(ctx context.Context, deleted *[]string) error {
	for _, name := range []string{b.cfg.MachineName, b.cfg.BuilderName} {
		exists, err := b.vm.Exists(ctx, name)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		if name == b.cfg.MachineName {
			if err := b.stopBox(ctx); err != nil {
				b.ui.Warn("stopping %s: %v; deleting it anyway", name, err)
			}
		}
		done := b.ui.Step("delete", name)
		err = b.vm.Delete(ctx, name, true)
		done(err)
		if err != nil {
			return err
		}
		*deleted = append(*deleted, name)
		if name == b.cfg.MachineName {
			if err := b.moveAuditAnchorAside(ctx); err != nil {
				return err
			}
		}
	}
	b.unmarkBuilder()
	if err := b.forgetSettings(); err != nil {
		return err
	}
	if err := keys.RemoveHostKey(b.cfg.StateDir(), b.cfg.MachineName); err != nil {
		return err
	}
	if err := os.Remove(b.knownHostsPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", b.knownHostsPath(), err)
	}
	return nil
}

// knownHostsPath is the known_hosts file hermes-box writes for ssh.
func (b *Box) knownHostsPath() string {
	return filepath.Join(b.cfg.StateDir(), filenames.KnownHosts)
}
