package cli

import (
	"bufio"
	"context"
	"io"
	"log/slog"

	"github.com/hermes-box/hermes-box/shared/hangup"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// runRelay reads the request line, checks it, and runs the verb in this
// process: no shell ever sees the argv. Bytes after the request line stay on
// stdin for verbs that read data. With --hold-output the verb's stdout and
// events are written only once it has returned (see heldOutput).
func runRelay(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "relay", "[--hold-output]")
	hold := fs.Bool("hold-output", false, "write nothing on stdout and stderr until the verb has returned")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	in := bufio.NewReaderSize(e.In, 64<<10)
	req, err := protocol.ReadRequest(in)
	if err != nil {
		return usageError("relay: %w", err)
	}
	sub := &env{Stdio: Stdio{In: in, Out: e.Out, Err: e.Err}, root: e.root, log: e.log, relayed: true}
	if *hold && req.Options.Stdin {
		h := newHeldOutput()
		defer h.flush(e.Out, e.Err)
		sub.Out, sub.Err = h.out, h.err
		sub.log = slog.New(slog.NewTextHandler(sub.Err, nil))
	}
	level := req.Options.LogLevel
	if level == "" {
		level = protocol.LevelInfo
	}
	sub.events = protocol.NewEventWriter(sub.Err, level)
	if !req.Options.Stdin {
		sub.In = emptyReader{}
	}
	// A verb that only waits, such as logs -f on a quiet log, learns at
	// once that the host's session ended, not at its next write.
	ctx, stop := hangup.Watch(ctx, e.Out)
	defer stop()
	return dispatch(ctx, sub, req.Argv, true)
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
