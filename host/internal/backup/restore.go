package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/detach"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// MachineOps are the machine operations the restore state machine drives.
// The smolvm driver implements them for real boxes; tests use a recording
// fake.
type MachineOps interface {
	// Exists and Running report a machine's state.
	Exists(ctx context.Context, name string) (bool, error)
	Running(ctx context.Context, name string) (bool, error)
	// List names every machine (to reap leftover candidates).
	List(ctx context.Context) ([]string, error)
	// FreePort picks a free loopback port for a candidate.
	FreePort(ctx context.Context) (int, error)
	// SafetySnapshot backs up the machine and leaves it stopped.
	SafetySnapshot(ctx context.Context, name string) (dir string, err error)
	// CreateRestore creates a machine in restore mode: it boots without
	// starting services until the restore-ready marker exists.
	CreateRestore(ctx context.Context, name string, port int) error
	// Apply starts the machine, streams the backup in dir to the agent's
	// `snapshot apply`, and restarts it normally.
	Apply(ctx context.Context, name string, port int, dir string) error
	// Health runs the full health check.
	Health(ctx context.Context, name string, port int) error
	Start(ctx context.Context, name string, port int) error
	Stop(ctx context.Context, name string) error
	Delete(ctx context.Context, name string) error
}

// Timeouts of the work that puts things back after a failure. Once the
// caller has given up (Ctrl-C, SIGTERM), every such step has at most
// InterruptTimeout left: the command ends within seconds, and what it could
// not finish is left for the next command, which says what it does (the
// restore journal, the reaping of candidates).
const (
	CleanupTimeout   = 2 * time.Minute
	RecoveryTimeout  = 30 * time.Minute
	InterruptTimeout = 10 * time.Second
)

// interruptGrace is InterruptTimeout; tests shorten it.
var interruptGrace = InterruptTimeout

// ErrInterrupted marks a restore stopped by the caller during the cut-over:
// the original machine is in the safety snapshot the error names.
var ErrInterrupted = errors.New("restore interrupted")

// candidateMark is in every candidate machine's name.
const candidateMark = "-restore-"

// candidateName is the name of a restore's candidate machine:
// <machine>-restore-<pid>-<nanos>.
func candidateName(machine string, pid int, nanos int64) string {
	return fmt.Sprintf("%s%s%d-%d", machine, candidateMark, pid, nanos)
}

// IsCandidate reports whether name is exactly the shape of a candidate of
// machine (candidateName): a machine that merely starts with
// "<machine>-restore-" is someone else's, and never reaped.
func IsCandidate(machine, name string) bool {
	rest, ok := strings.CutPrefix(name, machine+candidateMark)
	if !ok {
		return false
	}
	pid, nanos, ok := strings.Cut(rest, "-")
	return ok && isDecimal(pid) && isDecimal(nanos) && pid[0] != '0' && len(pid) <= 10 && len(nanos) <= 19
}

// isDecimal reports a non-empty run of ASCII digits.
func isDecimal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// Restore is the restore state machine for one machine.
type Restore struct {
	Ops      MachineOps
	Machine  string
	Port     int
	StateDir string
	Log      *slog.Logger
	// Now names candidates; time.Now when nil.
	Now func() time.Time
	// CleanupTimeout and RecoveryTimeout default to the constants.
	CleanupTimeout, RecoveryTimeout time.Duration
	// DiscardCurrent deletes an existing machine instead of keeping it in
	// a safety snapshot (a compromised box, whose own snapshot fails),
	// then restores as onto no machine.
	DiscardCurrent bool
}

// ErrSafetySnapshot is the safety snapshot of the existing machine
// failing: the machine is kept, and the restore did nothing.
var ErrSafetySnapshot = errors.New("the box's own safety snapshot failed")

// Run restores the verified backup in dir. A fresh machine is created in
// restore mode and applied; an existing one is first backed up (safety
// snapshot), the backup proven on a candidate machine on a random port,
// and only then the original replaced, rolling back from the safety
// snapshot when the replacement fails.
func (r *Restore) Run(ctx context.Context, dir string) error {
	r.defaults()
	exists, err := r.Ops.Exists(ctx, r.Machine)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if !exists {
		return r.fresh(ctx, dir)
	}
	if r.DiscardCurrent {
		r.Log.Warn("deleting the current machine without a safety snapshot, as --discard-current says", "machine", r.Machine)
		if err := r.remove(ctx, r.Machine); err != nil {
			return fmt.Errorf("restore: deleting the current %s: %w", r.Machine, err)
		}
		crashPoint("original-discarded")
		return r.fresh(ctx, dir)
	}
	return r.replace(ctx, dir)
}

func (r *Restore) defaults() {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CleanupTimeout == 0 {
		r.CleanupTimeout = CleanupTimeout
	}
	if r.RecoveryTimeout == 0 {
		r.RecoveryTimeout = RecoveryTimeout
	}
}

// detached is a context for a recovery step: it survives the caller's
// cancellation (Ctrl-C) by interruptGrace at most, and never outlives d.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return detach.Context(ctx, d, interruptGrace)
}

func (r *Restore) fresh(ctx context.Context, dir string) error {
	r.Log.Info("no existing machine; restoring directly", "machine", r.Machine)
	if err := r.Ops.CreateRestore(ctx, r.Machine, r.Port); err != nil {
		return fmt.Errorf("restore: creating %s: %w", r.Machine, err)
	}
	err := r.Ops.Apply(ctx, r.Machine, r.Port, dir)
	if err == nil {
		err = r.Ops.Health(ctx, r.Machine, r.Port)
	}
	if err == nil {
		return nil
	}
	if cerr := r.remove(ctx, r.Machine); cerr != nil {
		return fmt.Errorf("restore failed and removing the new machine %s also failed: %w", r.Machine, errors.Join(err, cerr))
	}
	return fmt.Errorf("restore failed; newly created machine was removed: %w", err)
}

// remove stops and deletes a machine this restore created, each step on
// its own fresh bounded context.
func (r *Restore) remove(ctx context.Context, name string) error {
	sctx, cancel := detached(ctx, r.CleanupTimeout)
	serr := r.Ops.Stop(sctx, name)
	cancel()
	dctx, cancel := detached(ctx, r.CleanupTimeout)
	defer cancel()
	if err := r.Ops.Delete(dctx, name); err != nil {
		return errors.Join(serr, err)
	}
	return nil
}

func (r *Restore) replace(ctx context.Context, dir string) error {
	wasRunning, err := r.Ops.Running(ctx, r.Machine)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	port, err := r.Ops.FreePort(ctx)
	if err != nil {
		return fmt.Errorf("restore: choosing a candidate port: %w", err)
	}
	safety, err := r.Ops.SafetySnapshot(ctx, r.Machine)
	if err != nil {
		return r.restartOriginal(ctx, wasRunning, fmt.Errorf("restore: %w, so the box was kept as it is: %w", ErrSafetySnapshot, err))
	}
	r.Log.Info("safety snapshot saved", "backup", safety)
	crashPoint("safety-snapshot")
	if err := r.candidate(ctx, dir, port); err != nil {
		return r.restartOriginal(ctx, wasRunning, fmt.Errorf("restore: candidate failed, original kept: %w", err))
	}
	return r.cutOver(ctx, dir, safety, wasRunning)
}

// candidate proves the backup on a throwaway machine, then removes it.
func (r *Restore) candidate(ctx context.Context, dir string, port int) error {
	name := candidateName(r.Machine, os.Getpid(), r.Now().UnixNano())
	if err := r.Ops.CreateRestore(ctx, name, port); err != nil {
		return fmt.Errorf("creating candidate %s: %w", name, err)
	}
	crashPoint("candidate-created")
	err := r.Ops.Apply(ctx, name, port, dir)
	if err == nil {
		crashPoint("candidate-applied")
		err = r.Ops.Health(ctx, name, port)
	}
	if cerr := r.remove(ctx, name); cerr != nil {
		return errors.Join(err, fmt.Errorf("removing candidate %s: %w", name, cerr))
	}
	return err
}

// restartOriginal restarts the original when it was running, on a fresh
// context, and returns cause with any restart failure.
func (r *Restore) restartOriginal(ctx context.Context, wasRunning bool, cause error) error {
	if !wasRunning {
		return cause
	}
	rctx, cancel := detached(ctx, r.RecoveryTimeout)
	defer cancel()
	if err := r.Ops.Start(rctx, r.Machine, r.Port); err != nil {
		return errors.Join(cause, fmt.Errorf("restarting the original machine: %w", err))
	}
	return cause
}

// cutOver replaces the original with the backup. The journal names the
// safety snapshot first: when the caller gives up halfway, the cut-over
// stops within InterruptTimeout and the journal stays, so that every later
// command says where the original is and `restore SAFETY` brings it back.
func (r *Restore) cutOver(ctx context.Context, dir, safety string, wasRunning bool) error {
	rctx, cancel := detached(ctx, r.RecoveryTimeout)
	defer cancel()
	if err := r.writeJournal(safety); err != nil {
		return r.restartOriginal(ctx, wasRunning, fmt.Errorf("restore aborted; original machine was preserved: %w", err))
	}
	if err := r.Ops.Delete(rctx, r.Machine); err != nil {
		if exists, xerr := r.Ops.Exists(rctx, r.Machine); xerr == nil && exists {
			r.clearJournal()
			return r.restartOriginal(ctx, wasRunning, fmt.Errorf("restore aborted; original machine was preserved: %w", err))
		}
	}
	crashPoint("original-deleted")
	err := r.Ops.CreateRestore(rctx, r.Machine, r.Port)
	if err == nil {
		crashPoint("primary-created")
		if err = r.Ops.Apply(rctx, r.Machine, r.Port, dir); err == nil {
			err = r.Ops.Health(rctx, r.Machine, r.Port)
		}
		if err != nil && ctx.Err() != nil {
			return r.interrupted(safety, err)
		}
		if err != nil {
			r.Log.Warn("final restore validation failed; rolling back", "error", err)
			if cerr := r.remove(ctx, r.Machine); cerr != nil {
				return fmt.Errorf("restore failed and removing the failed machine also failed; the original is in %s: %w", safety, errors.Join(err, cerr))
			}
		}
	}
	if err == nil {
		r.clearJournal()
		return r.settle(rctx, wasRunning)
	}
	if ctx.Err() != nil {
		return r.interrupted(safety, err)
	}
	return r.rollback(ctx, safety, wasRunning, err)
}

// interrupted ends a cut-over the caller gave up on, leaving the journal.
func (r *Restore) interrupted(safety string, cause error) error {
	return fmt.Errorf("%w during the cut-over: %s may be missing or incomplete; the original is in %s and `hermes-box restore %s` brings it back (until then every command says so): %w",
		ErrInterrupted, r.Machine, safety, safety, cause)
}

// rollback recreates the original from the safety snapshot.
func (r *Restore) rollback(ctx context.Context, safety string, wasRunning bool, cause error) error {
	rctx, cancel := detached(ctx, r.RecoveryTimeout)
	defer cancel()
	err := r.Ops.CreateRestore(rctx, r.Machine, r.Port)
	if err == nil {
		err = r.Ops.Apply(rctx, r.Machine, r.Port, safety)
	}
	if err != nil && ctx.Err() != nil {
		return r.interrupted(safety, errors.Join(cause, err))
	}
	if err != nil {
		return fmt.Errorf("restore failed and original-machine rollback also failed; the original is in %s: %w", safety, errors.Join(cause, err))
	}
	r.clearJournal()
	if err := r.settle(rctx, wasRunning); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("restore failed; original machine was recreated from %s: %w", safety, cause)
}

// settle leaves the primary stopped when the original was not running.
func (r *Restore) settle(ctx context.Context, wasRunning bool) error {
	if wasRunning {
		return nil
	}
	return r.Ops.Stop(ctx, r.Machine)
}

func (r *Restore) writeJournal(safety string) error {
	if r.StateDir == "" {
		return nil
	}
	return atomicfile.Write(filepath.Join(r.StateDir, filenames.RestoreJournal), []byte("machine="+r.Machine+"\nsafety="+safety+"\n"), 0o600)
}

func (r *Restore) clearJournal() {
	if r.StateDir != "" {
		_ = os.Remove(filepath.Join(r.StateDir, filenames.RestoreJournal))
	}
}

// Interrupted reports the safety snapshot of a cut-over that did not
// finish ("" when none): the original machine is in that backup.
func Interrupted(stateDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, filenames.RestoreJournal))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "safety="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: no safety= line", filepath.Join(stateDir, filenames.RestoreJournal))
}

// ReapCandidates deletes candidate machines of machine left by an
// interrupted restore.
func ReapCandidates(ctx context.Context, ops MachineOps, machine string) ([]string, error) {
	names, err := ops.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if !IsCandidate(machine, n) {
			continue
		}
		_ = ops.Stop(ctx, n)
		if err := ops.Delete(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}
