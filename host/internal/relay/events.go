package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// maxEventLine bounds one stderr line; the rest of a longer line is dropped
// (a stderr line is an event the agent wrote, or a message from a program).
const maxEventLine = 256 << 10

// RawSourceField is set to RawSourceStderr in the Fields of an event made
// from a stderr line that was not an event (a crash, a message from sudo).
const (
	RawSourceField  = protocol.FieldSource
	RawSourceStderr = "stderr"
)

// stderrLimitKey is the context key of a call's stderr cap.
type stderrLimitKey struct{}

// stderrCap is the most raw bytes a call's stderr may carry (0: no cap),
// and what an error calls that stderr.
type stderrCap struct {
	what string
	max  int64
}

// WithStderrLimit is ctx with a cap on the raw bytes of a call's stderr: a
// call run with it ends with a *bounded.LimitError naming what once its
// stderr passes max bytes, whatever they hold. Blank lines, the rest of a
// line past maxEventLine and fields no one reads count as much as events
// do, so a box cannot keep the host reading stderr until a deadline. The
// agent client sets it from its verb table.
func WithStderrLimit(ctx context.Context, what string, max int64) context.Context {
	return context.WithValue(ctx, stderrLimitKey{}, stderrCap{what: what, max: max})
}

func stderrLimit(ctx context.Context) stderrCap {
	c, _ := ctx.Value(stderrLimitKey{}).(stderrCap)
	return c
}

// readEvents reads r to its end, line by line, and passes each line to emit
// as an event. It keeps reading whatever the lines hold, so the remote side
// never blocks on a full stderr, until r passes the cap: then it returns a
// *bounded.LimitError, and its caller ends the call and drains r.
func readEvents(r io.Reader, emit func(protocol.Event), limit stderrCap) error {
	if emit == nil {
		emit = func(protocol.Event) {}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var size int64
	skipping := false // past maxEventLine, until the next newline
	for {
		chunk, err := br.ReadSlice('\n')
		if size += int64(len(chunk)); limit.max > 0 && size > limit.max {
			return &bounded.LimitError{What: limit.what, Limit: limit.max}
		}
		switch {
		case skipping:
		case len(line)+len(chunk) > maxEventLine:
			line = append(line, chunk[:maxEventLine-len(line)]...)
			emitLine(line, emit)
			skipping = true
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !skipping {
			emitLine(line, emit)
		}
		line, skipping = line[:0], false
		if err != nil {
			return nil
		}
	}
}

// emitLine decodes one line; a line that is not an event becomes a log
// event carrying the raw text. Blank lines are dropped.
func emitLine(line []byte, emit func(protocol.Event)) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	ev, err := protocol.DecodeEvent(line)
	if err != nil {
		ev = rawEvent(string(line))
	}
	emit(ev)
}

// rawEvent is the event for a stderr line that is not an event.
func rawEvent(text string) protocol.Event {
	return protocol.Event{
		Time:    time.Now().UTC(),
		Type:    protocol.EventLog,
		Level:   protocol.LevelWarn,
		Message: strings.ToValidUTF8(text, "\uFFFD"),
		Fields:  map[string]string{RawSourceField: RawSourceStderr},
	}
}
