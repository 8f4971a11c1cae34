package machine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// Timeouts of the lifecycle under TCG (env overrides are in seconds).
var (
	bootTimeout = envSeconds("SMOLVM_QEMU_BOOT_TIMEOUT", 180)
	stopTimeout = envSeconds("SMOLVM_QEMU_STOP_TIMEOUT", 30)
)

func envSeconds(key string, def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// State resolves a machine's state: a running record whose QEMU is gone is
// stopped; one whose guest init does not answer is unreachable.
func (s *Store) State(ctx context.Context, r *Record) string {
	if r.State != Running {
		return r.State
	}
	dir := s.DataDir(r.Name)
	if !alive(r.PID, dir) {
		return Stopped
	}
	if err := ping(ctx, dir, 3*time.Second); err != nil && !errors.Is(err, errPortsBusy) {
		return Unreachable
	}
	return Running
}

// Start boots the machine, waits for its guest init, then has it start the
// entrypoint with the machine's environment and resolved secrets. It
// returns the QEMU pid and whether the machine was already running.
func (s *Store) Start(ctx context.Context, name string) (int, bool, error) {
	r, err := s.Load(name)
	if err != nil {
		return 0, false, err
	}
	dir := s.DataDir(name)
	switch s.State(ctx, r) {
	case Running:
		return r.PID, true, nil
	case Unreachable:
		_ = kill(r.PID, dir, 5*time.Second)
	}
	env, err := s.guestEnv(r, nil)
	if err != nil {
		return 0, false, err
	}
	pid, err := launch(ctx, dir, r)
	if err != nil {
		return 0, false, s.fail(r, agentError("start machine", err))
	}
	r.State, r.PID = Running, pid
	if err := s.Save(r); err != nil {
		_ = kill(pid, dir, time.Second)
		return 0, false, err
	}
	if err := waitReady(ctx, dir, pid, bootTimeout); err != nil {
		_ = kill(pid, dir, time.Second)
		return 0, false, s.fail(r, agentError("start machine", err))
	}
	req := wire.BootRequest{Argv: append(append([]string{}, r.Entrypoint...), r.Cmd...), Env: env, Dir: r.Workdir}
	if err := s.boot(ctx, dir, req); err != nil {
		return pid, false, agentError("start workload", err)
	}
	return pid, false, nil
}

// fail records a failed start and returns err.
func (s *Store) fail(r *Record, err error) error {
	r.State, r.PID = Failed, 0
	return errors.Join(err, s.Save(r))
}

func (s *Store) boot(ctx context.Context, dir string, req wire.BootRequest) error {
	c, err := dialCtl(ctx, dir, 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.sendJSON(wire.Boot, req); err != nil {
		return err
	}
	_, err = c.expect(wire.OK)
	return err
}

// Stop powers the guest off through the control channel (the guest init
// sends SIGTERM to the entrypoint, waits for it, syncs and powers off), then
// kills QEMU if it is still there after the stop timeout.
func (s *Store) Stop(ctx context.Context, name string) (bool, error) {
	r, err := s.Load(name)
	if err != nil {
		return false, err
	}
	dir := s.DataDir(name)
	wasRunning := alive(r.PID, dir)
	if wasRunning {
		if err := poweroff(ctx, dir); err == nil {
			waitGone(r.PID, dir, stopTimeout)
		}
		if err := kill(r.PID, dir, 5*time.Second); err != nil {
			return true, agentError("stop machine", err)
		}
	}
	if r.State == Running || r.State == Unreachable {
		r.State = Stopped
	}
	r.PID = 0
	cleanRuntime(dir)
	return wasRunning, s.Save(r)
}

func poweroff(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dialCtl(ctx, dir, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.send(wire.Poweroff, nil); err != nil {
		return err
	}
	_, err = c.expect(wire.OK)
	return err
}

// cleanRuntime removes what only a running machine needs.
func cleanRuntime(dir string) {
	for i := range CtlPorts {
		_ = os.Remove(ctlSocket(dir, i))
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("c%d.lock", i)))
	}
	_ = os.Remove(filepath.Join(dir, pidFile))
}

// Delete removes a machine and its data dir, killing QEMU first if it runs.
func (s *Store) Delete(ctx context.Context, name string) error {
	r, err := s.Load(name)
	if err != nil {
		return err
	}
	dir := s.DataDir(name)
	if err := kill(r.PID, dir, 3*time.Second); err != nil {
		return agentError("delete machine", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return storageError("remove data dir", err)
	}
	return nil
}

// guestEnv is the environment of the entrypoint and of exec: PATH and HOME,
// the machine's -e values, its secrets read from the host environment now,
// then extra.
func (s *Store) guestEnv(r *Record, extra []string) ([]string, error) {
	env := []string{"PATH=" + defaultGuestPath, "HOME=/root"}
	env = append(env, r.Env...)
	for _, ref := range r.Secrets {
		v, ok := os.LookupEnv(ref.Host)
		if !ok {
			return nil, configError("--secret-env", fmt.Sprintf("secret '%s': host environment variable '%s' is not set", ref.Guest, ref.Host))
		}
		env = append(env, ref.Guest+"="+v)
	}
	return append(env, extra...), nil
}

const defaultGuestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
