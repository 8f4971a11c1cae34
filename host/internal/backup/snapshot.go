package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// SnapshotOps are what a snapshot needs of the machine and its agent.
type SnapshotOps interface {
	Exists(ctx context.Context, name string) (bool, error)
	Running(ctx context.Context, name string) (bool, error)
	Start(ctx context.Context, name string, port int) error
	Stop(ctx context.Context, name string) error
	// StopServices and StartServices drive the agent's supervisor.
	StopServices(ctx context.Context, name string) error
	StartServices(ctx context.Context, name string) error
	// Stream writes the agent's `snapshot write PART` to w.
	Stream(ctx context.Context, name, part string, w io.Writer) error
}

// Snapshot backs up one machine.
type Snapshot struct {
	Ops        SnapshotOps
	BackupsDir string
	Port       int
	Meta       Meta
	// LeaveStopped stops the machine afterwards (the safety snapshot of a
	// restore); otherwise it is returned to the state it was in.
	LeaveStopped bool
	// Incremental, when set, writes the backup in place of Write (an
	// incremental snapshot into the machine's chunk store), while the
	// services are stopped; it returns the backup's directory.
	Incremental func(ctx context.Context) (string, error)
}

// Run stops the services, streams both parts into a new backup and
// returns its directory. Whatever happens, the machine is put back the way
// it was (on fresh bounded contexts), and a failed backup leaves nothing.
func (s *Snapshot) Run(ctx context.Context) (dir string, err error) {
	name := s.Meta.Machine
	exists, err := s.Ops.Exists(ctx, name)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if !exists {
		return "", fmt.Errorf("snapshot: machine %q does not exist", name)
	}
	wasRunning, err := s.Ops.Running(ctx, name)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if !wasRunning {
		if err := s.Ops.Start(ctx, name, s.Port); err != nil {
			return "", fmt.Errorf("snapshot: starting %s: %w", name, err)
		}
	}
	defer func() { err = s.settle(ctx, wasRunning, dir, err) }()
	if err := s.Ops.StopServices(ctx, name); err != nil {
		return "", fmt.Errorf("snapshot: stopping guest services: %w", err)
	}
	crashPoint("services-stopped")
	if s.Incremental != nil {
		return s.Incremental(ctx)
	}
	src := func(ctx context.Context, part string, w io.Writer) error { return s.Ops.Stream(ctx, name, part, w) }
	return Write(ctx, s.BackupsDir, s.Meta, src)
}

// ErrNotSettled is a machine a snapshot could not return to its previous
// state; the error says which command does.
var ErrNotSettled = errors.New("returning the machine to its previous state failed")

// settle returns the machine to its state before the snapshot.
func (s *Snapshot) settle(ctx context.Context, wasRunning bool, dir string, cause error) error {
	rctx, cancel := detached(ctx, RecoveryTimeout)
	defer cancel()
	name := s.Meta.Machine
	var err error
	if wasRunning && !s.LeaveStopped {
		err = s.Ops.StartServices(rctx, name)
	} else {
		err = s.Ops.Stop(rctx, name)
	}
	if err == nil {
		return cause
	}
	recover := "`hermes-box restart` restarts its services"
	if !wasRunning || s.LeaveStopped {
		recover = "`hermes-box stop` stops it"
	}
	if cause == nil {
		return fmt.Errorf("snapshot saved at %s, but %w (%s): %w", dir, ErrNotSettled, recover, err)
	}
	return errors.Join(cause, fmt.Errorf("%w (%s): %w", ErrNotSettled, recover, err))
}
