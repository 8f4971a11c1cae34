package box

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// smolDriver is the machine driver of snapshot, restore and package on the
// smolvm driver and the box's helpers: the same create, start and verify
// as init and start.
type smolDriver struct {
	b *Box
	// restoring are the machines this process created in restore mode
	// whose backup is not applied yet: their agent is reached through
	// smolvm exec, as their sshd is not running.
	mu        sync.Mutex
	restoring map[string]bool
	// owed are the restored machines started without their secrets.
	owed map[string]bool
}

func newSmolDriver(b *Box) *smolDriver {
	return &smolDriver{b: b, restoring: map[string]bool{}, owed: map[string]bool{}}
}

// owesSecrets reports, and forgets, whether name was started in a restore
// without the secrets a start delivers.
func (d *smolDriver) owesSecrets(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	owed := d.owed[name]
	delete(d.owed, name)
	return owed
}

func (d *smolDriver) inRestoreMode(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restoring[name]
}

func (d *smolDriver) setRestoreMode(name string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.restoring[name] = true
	} else {
		delete(d.restoring, name)
	}
}

func (d *smolDriver) Exists(ctx context.Context, name string) (bool, error) {
	return d.b.vm.Exists(ctx, name)
}

func (d *smolDriver) Running(ctx context.Context, name string) (bool, error) {
	m, err := d.b.vm.Status(ctx, name)
	if err != nil {
		return false, err
	}
	return m.State == smolvm.StateRunning, nil
}

func (d *smolDriver) List(ctx context.Context) ([]string, error) {
	ms, err := d.b.vm.List(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return names, nil
}

// Start boots a machine and verifies it as `hermes-box start` does. A
// machine that was just restored has its host key pinned first, out of
// band: it carries the backup's host keys.
func (d *smolDriver) Start(ctx context.Context, name string, port int) error {
	restored := d.inRestoreMode(name)
	if err := bootAndVerifyAt(ctx, d.b, name, port, restored); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.restoring, name)
	if restored {
		d.owed[name] = true
	}
	d.mu.Unlock()
	return nil
}

// Boot starts a machine in restore mode and waits only until its agent
// answers through smolvm exec: its services wait for the restore.
func (d *smolDriver) Boot(ctx context.Context, name string) error {
	done := d.b.ui.Step("start", name+" in restore mode")
	err := d.b.vm.Start(ctx, name)
	if err == nil {
		err = d.waitExec(ctx, name)
	}
	done(err)
	return err
}

// waitExec polls the agent's version verb through smolvm exec until it
// answers, within the startup deadline.
func (d *smolDriver) waitExec(ctx context.Context, name string) error {
	w := waiting(d.b, name, "the agent of "+name+" to answer through smolvm exec")
	return waitAnswers(ctx, d.b, w, name, directRelay(d.b, name))
}

// waitAnswers polls the agent's version verb over tr until it answers,
// within the startup deadline; w beats between the polls. A machine still
// booting (smolvm cannot reach its agent yet) is waited for; an agent that
// does not answer maxNoAnswers calls in a row ends the wait.
func waitAnswers(ctx context.Context, b *Box, w *waiter, name string, tr relay.Transport) error {
	ctx, cancel := context.WithTimeout(ctx, b.timing.startupDeadline)
	defer cancel()
	var last error
	var unanswered noAnswers
	var same sameFailures
	for {
		last = agent.New(tr, nil).Answers(ctx)
		if last == nil {
			return nil
		}
		if err := unanswered.note(last); err != nil {
			return err
		}
		if err := same.note(last); err != nil {
			return err
		}
		if err := w.beat(ctx, last); err != nil {
			return err
		}
		if serr := sleep(ctx, b.timing.pollInterval); serr != nil {
			return fmt.Errorf("the agent of %s did not answer through smolvm exec: %w", name, last)
		}
	}
}

// Stop stops a machine that runs; a stopped one is left alone.
func (d *smolDriver) Stop(ctx context.Context, name string) error {
	m, err := d.b.vm.Status(ctx, name)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning && m.State != smolvm.StateUnreachable {
		return nil
	}
	done := d.b.ui.Step("stop", name)
	err = d.b.vm.Stop(ctx, name)
	done(err)
	return err
}

// Delete deletes a machine; a machine other than the box (a candidate)
// also loses its pinned host key and its network proof.
func (d *smolDriver) Delete(ctx context.Context, name string) error {
	done := d.b.ui.Step("delete", name)
	err := d.b.vm.Delete(ctx, name, true)
	done(err)
	if err != nil {
		return err
	}
	d.setRestoreMode(name, false)
	if name != d.b.cfg.MachineName {
		return errors.Join(keys.RemoveHostKey(d.b.cfg.StateDir(), name), netmode.Forget(d.b.cfg.StateDir(), name))
	}
	return nil
}

// CreateRestore creates name from the base artifact in restore mode, on
// SSH port, with the runtime's create (one code path with init).
func (d *smolDriver) CreateRestore(ctx context.Context, name string, port int) error {
	if err := createMachine(ctx, d.b, restoreSpec(d.b, name, port)); err != nil {
		return err
	}
	d.setRestoreMode(name, true)
	return nil
}

// Agent is smolvm exec for a machine in restore mode, else the SSH relay
// with the machine's pinned host key. The exec transport asks the release's
// row whether `machine exec -i` is safe with large input (the restore
// streams a whole backup); where it is not, the agent holds its output
// until the input ends (relay.Exec.HoldOutput).
func (d *smolDriver) Agent(ctx context.Context, name string, port int) (relay.Transport, error) {
	if d.inRestoreMode(name) {
		rel, err := d.b.vm.Release(ctx)
		if err != nil {
			return nil, fmt.Errorf("choosing the exec transport to %s: %w", name, err)
		}
		tr := execRelay(d.b, name)
		tr.HoldOutput = !rel.LargeExecStdin
		return tr, nil
	}
	tr, err := sshRelayTo(d.b, name, port)
	if err != nil {
		return nil, err
	}
	return tr, nil
}

// Version is smolvm's version for the manifest, "unknown" when it cannot
// be read.
func (d *smolDriver) Version(ctx context.Context) string {
	v, err := d.b.vm.Version(ctx)
	if err != nil {
		return "unknown"
	}
	return v
}
