package cli

import (
	"context"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/snapshot"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func runSnapshot(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("snapshot: want write rootfs|workspace or apply")
	}
	switch args[0] {
	case "write":
		fs := newFlags(e, "snapshot write", "rootfs|workspace")
		if err := parseFlags(fs, args[1:], 1); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usageError("snapshot write: want rootfs or workspace")
		}
		spec, err := snapshot.PartSpec(e.root, fs.Arg(0))
		if err != nil {
			return usageError("snapshot write: %w", err)
		}
		e.step("snapshot-"+fs.Arg(0), protocol.StepStarted)
		// A part compresses as it goes: a run of zeros may send nothing
		// for a while.
		stop := protocol.Heartbeat(e.emit, "snapshot-"+fs.Arg(0))
		err = snapshot.Write(ctx, e.Out, spec)
		stop()
		if err != nil {
			return err
		}
		e.step("snapshot-"+fs.Arg(0), protocol.StepDone)
		return nil
	case "apply":
		fs := newFlags(e, "snapshot apply", "  (parts framed on stdin)")
		if err := parseFlags(fs, args[1:], 0); err != nil {
			return err
		}
		opts := snapshot.ApplyOptions{Root: e.root, Chown: os.Geteuid() == 0, Progress: func(part string) {
			e.step("apply-"+part, protocol.StepStarted)
		}}
		// After the stream, the walk of the whole root says nothing.
		defer protocol.Heartbeat(e.emit, "snapshot-apply")()
		return snapshot.Apply(ctx, e.In, opts)
	}
	return usageError("snapshot: unknown subcommand %q: want write or apply", args[0])
}

// emit reports an event; a failure to report is not the verb's failure.
func (e *env) emit(ev protocol.Event) { _ = e.events.Emit(ev) }

// step reports a step event; a failure to report is not the verb's failure.
func (e *env) step(name string, state protocol.StepState) {
	_ = e.events.Emit(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: state, Message: name + " " + string(state)})
}
