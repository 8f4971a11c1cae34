// Package control is the local channel between a running `boot` and the
// agent's other verbs (services, logs, health, and so the host's relay): a
// root-only unix socket that carries one JSON request line and one JSON
// response line per connection, with the peer's credentials checked.
package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Socket returns the socket path under root.
func Socket(root string) string { return filepath.Join(root, boxlayout.ControlSocket) }

// Op is what a request asks for.
type Op string

// The operations.
const (
	OpStatus  Op = "status"
	OpStart   Op = "start"
	OpStop    Op = "stop"
	OpRestart Op = "restart"
	OpHealth  Op = "health"
	OpLogPath Op = "log-path"
)

// All is the Name that means every program.
const All = "all"

// maxLine bounds a request or response line.
const maxLine = 1 << 20

// Request is one call. Name is a program, or All, for start/stop/restart
// and log-path.
type Request struct {
	Op   Op     `json:"op"`
	Name string `json:"name,omitempty"`
}

// Service is one program's status: the health report's fields plus
// supervisorctl's one-line description (the `services` verb's result type).
type Service = protocol.ServiceStatus

// Response is the answer. Error is set when the request failed; the other
// fields belong to the op.
type Response struct {
	Error    string                       `json:"error,omitempty"`
	Services []Service                    `json:"services,omitempty"`
	Checks   map[health.Code]health.Check `json:"checks,omitempty"`
	LogPath  string                       `json:"logPath,omitempty"`
}

// Errors callers branch on.
var (
	// ErrNotRunning means no boot answers on the socket.
	ErrNotRunning = errors.New("no supervisor is running (is `hermes-box-agent boot` up?)")
	// ErrRefused is a request the supervisor answered with an error.
	ErrRefused = errors.New("supervisor refused")
)

// Call sends req to the socket at path and returns the response. A response
// carrying an error is returned along with an ErrRefused error.
func Call(ctx context.Context, path string, req Request) (Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return Response{}, fmt.Errorf("%w: %s: %w", ErrNotRunning, path, err)
		}
		return Response{}, fmt.Errorf("connecting to the supervisor: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return Response{}, fmt.Errorf("encoding request: %w", err)
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return Response{}, fmt.Errorf("sending request to the supervisor: %w", err)
	}
	var resp Response
	if err := readJSONLine(bufio.NewReader(conn), &resp); err != nil {
		if ctx.Err() != nil {
			return Response{}, fmt.Errorf("waiting for the supervisor: %w", ctx.Err())
		}
		return Response{}, fmt.Errorf("reading the supervisor's response: %w", err)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("%w: %s", ErrRefused, resp.Error)
	}
	return resp, nil
}

// readJSONLine decodes one bounded line into v, refusing unknown fields.
func readJSONLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %q: %w", truncate(line), err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
