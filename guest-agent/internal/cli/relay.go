package cli

import (
	"bufio"
	"context"
	"io"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// runRelay reads the request line, checks it, and runs the verb in this
// process: no shell ever sees the argv. Bytes after the request line stay on
// stdin for verbs that read data.
func runRelay(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "relay", "")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	in := bufio.NewReaderSize(e.In, 64<<10)
	req, err := protocol.ReadRequest(in)
	if err != nil {
		return usageError("relay: %w", err)
	}
	sub := &env{Stdio: Stdio{In: in, Out: e.Out, Err: e.Err}, root: e.root, log: e.log, relayed: true}
	level := req.Options.LogLevel
	if level == "" {
		level = protocol.LevelInfo
	}
	sub.events = protocol.NewEventWriter(e.Err, level)
	if !req.Options.Stdin {
		sub.In = emptyReader{}
	}
	ctx, stop := watchOutput(ctx, e.Out)
	defer stop()
	return dispatch(ctx, sub, req.Argv, true)
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
