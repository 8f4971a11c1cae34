package box

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/detach"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// ErrInterrupted is wrapped by the error of a lifecycle command the caller
// gave up on (Ctrl-C, SIGTERM): its message says what state the command
// left and its hint what to run next.
var ErrInterrupted = errors.New("interrupted")

// cleanupContext is the context of a cleanup step (a stop or delete after
// a step failed or was interrupted): it outlives ctx and is bounded by
// cleanupTimeout, and by interruptGrace from the moment ctx is cancelled.
func cleanupContext(ctx context.Context, b *Box) (context.Context, context.CancelFunc) {
	return detach.Context(ctx, b.timing.cleanupTimeout, b.timing.interruptGrace)
}

// stopMachine stops a machine on a cleanup context, so that it works
// after the operation's context ended.
func stopMachine(ctx context.Context, b *Box, name string) error {
	ctx, cancel := cleanupContext(ctx, b)
	defer cancel()
	return b.vm.Stop(ctx, name)
}

// removeMachine stops and deletes a machine on a cleanup context.
func removeMachine(ctx context.Context, b *Box, name string) error {
	ctx, cancel := cleanupContext(ctx, b)
	defer cancel()
	exists, err := b.vm.Exists(ctx, name)
	if err != nil || !exists {
		return err
	}
	return b.vm.Delete(ctx, name, true)
}

// interrupted turns the error of command cmd into one that says what state
// the interrupted command left and what to run next, when ctx was
// cancelled; otherwise err is returned unchanged.
func interrupted(ctx context.Context, b *Box, cmd string, err error) error {
	if err == nil || ctx.Err() == nil || NeedsRecovery(err) {
		return err
	}
	state, next := leftState(ctx, b, cmd)
	return &userr.Error{Err: fmt.Errorf("%s %w: %s", cmd, ErrInterrupted, state), Next: next, Code: userr.ExitInterrupted}
}

// leftState reads the machines back (one smolvm call, bounded by the
// interrupt grace) and says what an interrupted cmd left, and what to run
// next.
func leftState(ctx context.Context, b *Box, cmd string) (state, next string) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timing.interruptGrace)
	defer cancel()
	ms, err := b.vm.List(lctx)
	if err != nil {
		return fmt.Sprintf("the machines' state could not be read (%v)", err), "hermes-box status"
	}
	var parts []string
	found := smolvm.Machine{}
	for _, m := range ms {
		switch m.Name {
		case b.cfg.MachineName:
			found = m
		case b.cfg.BuilderName:
			parts = append(parts, fmt.Sprintf("the builder %s is left %s (the next init deletes it)", m.Name, m.State))
		}
	}
	name := b.cfg.MachineName
	switch {
	case found.Name == "":
		parts = append([]string{"there is no box " + name}, parts...)
		next = "hermes-box init"
	case found.State == smolvm.StateRunning && cmd == "stop":
		parts = append([]string{name + " is still running"}, parts...)
		next = "hermes-box stop"
	case found.State == smolvm.StateRunning:
		parts = append([]string{name + " is running but was not verified (its secrets may not be delivered)"}, parts...)
		next = "hermes-box restart"
	case found.State == smolvm.StateStopped || found.State == smolvm.StateCreated:
		parts = append([]string{fmt.Sprintf("%s exists and is %s", name, found.State)}, parts...)
		next = "hermes-box start"
		if cmd == "stop" {
			next = "nothing: the box is stopped (hermes-box start brings it back)"
		}
	default:
		parts = append([]string{fmt.Sprintf("%s is %s", name, found.State)}, parts...)
		next = "hermes-box restart"
	}
	return strings.Join(parts, "; "), next
}

func builderMarkPath(b *Box) string {
	return filepath.Join(b.cfg.StateDir(), filenames.BuilderInUse)
}

func markBuilder(b *Box) error {
	return atomicfile.Write(builderMarkPath(b), []byte(b.cfg.BuilderName+"\n"), 0o600)
}

func unmarkBuilder(b *Box) {
	_ = os.Remove(builderMarkPath(b))
}

// ownsLeftBuilder reports whether a builder named name was left by an
// interrupted init of this project.
func ownsLeftBuilder(b *Box, name string) bool {
	data, err := os.ReadFile(builderMarkPath(b))
	return err == nil && strings.TrimSpace(string(data)) == name
}

// reapBuilder deletes the builder an interrupted init of this project left
// (preflight found it).
func reapBuilder(ctx context.Context, b *Box) error {
	name := b.cfg.BuilderName
	if !b.leftBuilder {
		return nil
	}
	done := b.ui.Step("builder-delete", name+", left by an interrupted init")
	err := removeMachine(ctx, b, name)
	done(err)
	if err == nil {
		unmarkBuilder(b)
	}
	return err
}
