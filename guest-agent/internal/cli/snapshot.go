package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/snapshot"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func runSnapshot(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("snapshot: want write rootfs|workspace, chunks rootfs|workspace or apply")
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
	case "chunks":
		return runSnapshotChunks(ctx, e, args[1:])
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
	return usageError("snapshot: unknown subcommand %q: want write, chunks or apply", args[0])
}

// emit reports an event; a failure to report is not the verb's failure.
func (e *env) emit(ev protocol.Event) { _ = e.events.Emit(ev) }

// step reports a step event; a failure to report is not the verb's failure.
func (e *env) step(name string, state protocol.StepState) {
	_ = e.events.Emit(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: state, Message: name + " " + string(state)})
}

// runSnapshotChunks is `snapshot chunks PART`: what the host holds on
// stdin, the chunks it lacks and the part's tree on stdout.
func runSnapshotChunks(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "snapshot chunks", "rootfs|workspace  (held chunk ids on stdin)")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("snapshot chunks: want rootfs or workspace")
	}
	part := fs.Arg(0)
	spec, err := snapshot.PartSpec(e.root, part)
	if err != nil {
		return usageError("snapshot chunks: %w", err)
	}
	e.step("snapshot-"+part, protocol.StepStarted)
	opt := snapshot.ChunkOptions{Part: part, CacheDir: filepath.Join(e.root, boxlayout.InRoot(boxlayout.ChunkCache))}
	// A part the host already holds sends almost nothing while it is read.
	stop := protocol.Heartbeat(e.emit, "snapshot-"+part)
	err = snapshot.Chunks(ctx, e.In, e.Out, spec, opt)
	stop()
	if err != nil {
		return err
	}
	e.step("snapshot-"+part, protocol.StepDone)
	return nil
}
