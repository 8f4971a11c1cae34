package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ErrVersion is returned when a request speaks another protocol version.
var ErrVersion = errors.New("unsupported protocol version")

// WriteRequest encodes req as one line on w.
func WriteRequest(w io.Writer, req Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("writing request: %w", err)
	}
	return nil
}

// ReadRequest reads exactly one request line from r and leaves any bytes
// after it unread, so a verb can go on reading its input from r.
func ReadRequest(r *bufio.Reader) (Request, error) {
	line, err := readLine(r, MaxRequestBytes)
	if err != nil {
		return Request{}, fmt.Errorf("reading request: %w", err)
	}
	return DecodeRequest(line)
}

// DecodeRequest decodes and validates one request line. Unknown fields are
// refused so a newer host cannot be misread by an older agent.
func DecodeRequest(line []byte) (Request, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf("decoding request %q: %w", truncate(line), err)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("decoding request %q: trailing data after the request", truncate(line))
	}
	if err := req.Validate(); err != nil {
		return Request{}, err
	}
	return req, nil
}

// Validate checks the version and the shape of the argv.
func (r Request) Validate() error {
	if r.ProtocolVersion != Version {
		return fmt.Errorf("%w: got %d, this side speaks %d", ErrVersion, r.ProtocolVersion, Version)
	}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return errors.New("request has no verb")
	}
	switch r.Options.LogLevel {
	case "", LevelDebug, LevelInfo, LevelWarn, LevelError:
	default:
		return fmt.Errorf("request has unknown log level %q", r.Options.LogLevel)
	}
	return nil
}

// readLine reads up to and including '\n', refusing lines longer than limit.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > limit {
			return nil, fmt.Errorf("line longer than %d bytes", limit)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return nil, errors.New("line not terminated by a newline")
		default:
			return nil, err
		}
	}
}

// EventWriter writes events as JSON Lines; it is safe for concurrent use.
type EventWriter struct {
	mu      sync.Mutex
	w       io.Writer
	minimum Level
	now     func() time.Time
}

// NewEventWriter returns an EventWriter that drops events below minimum.
func NewEventWriter(w io.Writer, minimum Level) *EventWriter {
	return &EventWriter{w: w, minimum: minimum, now: time.Now}
}

// Emit writes one event, stamping its time and level when unset.
func (e *EventWriter) Emit(ev Event) error {
	if ev.Level == "" {
		ev.Level = LevelInfo
	}
	if !ev.Level.Enabled(e.minimum) {
		return nil
	}
	if ev.Time.IsZero() {
		ev.Time = e.now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding event: %w", err)
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

// DecodeEvent decodes one JSON line of the agent's stderr. Fields added by
// a later version are ignored; a line that is not an event is an error that
// quotes it.
func DecodeEvent(line []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, fmt.Errorf("decoding event %q: %w", truncate(line), err)
	}
	if ev.Type == "" || ev.Time.IsZero() {
		return Event{}, fmt.Errorf("decoding event %q: missing type or time", truncate(line))
	}
	return ev, nil
}

// truncate keeps error messages about bad input short.
func truncate(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
