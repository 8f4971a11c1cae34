// Package wire is the framed protocol between the smolvm stand-in on the host
// and its guest init, carried over virtio-serial ports exposed as unix
// sockets. A frame is the magic "SMQ1", a big-endian session id (8 bytes), a
// type byte, a big-endian payload length (4 bytes) and the payload.
//
// A virtio port outlives the host connections made to it, so a frame written
// for an aborted session can reach a later one. Both ends therefore drop
// frames of other sessions, and the reader resynchronises on the magic after
// garbage. The guest cannot tell reliably when a host connection ends (the
// open/close events and the data travel on different virtqueues), so the
// host sends a Heartbeat every HeartbeatInterval while a session is open and
// the guest cancels a session that has been silent for SessionTimeout.
package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Magic starts every frame.
const Magic = "SMQ1"

const headerLen = len(Magic) + 8 + 1 + 4

// MaxPayload bounds one frame's payload; data travels in Chunk-sized frames.
const (
	MaxPayload = 1 << 20
	Chunk      = 32 << 10
)

// Type says what a frame carries.
type Type byte

// Frame types. Host to guest: Ping, Exec, Stdin, StdinEOF, Boot, Poweroff,
// Put, Data, End, Get, Heartbeat. Guest to host: Pong, Stdout, Stderr, Exit, FileInfo,
// Data, End, OK, Fail.
const (
	Ping     Type = 'P'
	Pong     Type = 'p'
	Exec     Type = 'X'
	Stdin    Type = 'I'
	StdinEOF Type = 'C'
	Stdout   Type = '1'
	Stderr   Type = '2'
	Exit     Type = 'x'
	Boot     Type = 'B'
	Poweroff Type = 'O'
	Put      Type = 'W'
	Get      Type = 'R'
	FileInfo Type = 'f'
	Data     Type = 'D'
	End      Type = 'E'
	OK       Type = 'k'
	Fail     Type = 'e'
	// Heartbeat keeps a session alive.
	Heartbeat Type = 'H'
)

// Session liveness (see the package comment).
const (
	HeartbeatInterval = time.Second
	SessionTimeout    = 10 * time.Second
)

// Frame is one message of a session.
type Frame struct {
	Session uint64
	Type    Type
	Payload []byte
}

// ExecRequest runs a command in the guest (payload of Exec).
type ExecRequest struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
}

// ExitStatus ends an Exec session (payload of Exit).
type ExitStatus struct {
	Code int `json:"code"`
}

// BootRequest starts the machine's entrypoint once per boot (payload of Boot).
// An empty Argv means the machine has no entrypoint and just stays up.
type BootRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

// PutRequest writes a file in the guest (payload of Put); Data frames and an
// End frame follow. When Path is a directory the file is Name inside it.
type PutRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Mode uint32 `json:"mode"`
	Size int64  `json:"size"`
}

// GetRequest reads a regular file from the guest (payload of Get); the guest
// answers FileInfo, Data frames and End, or Fail.
type GetRequest struct {
	Path string `json:"path"`
}

// FileMeta describes the file a Get returns (payload of FileInfo).
type FileMeta struct {
	Mode uint32 `json:"mode"`
	Size int64  `json:"size"`
}

// Encode returns the bytes of f, to be written with one Write call.
func Encode(f Frame) ([]byte, error) {
	if len(f.Payload) > MaxPayload {
		return nil, fmt.Errorf("encoding frame: payload of %d bytes exceeds %d", len(f.Payload), MaxPayload)
	}
	b := make([]byte, headerLen, headerLen+len(f.Payload))
	copy(b, Magic)
	binary.BigEndian.PutUint64(b[4:], f.Session)
	b[12] = byte(f.Type)
	binary.BigEndian.PutUint32(b[13:], uint32(len(f.Payload)))
	return append(b, f.Payload...), nil
}

// JSON builds a frame whose payload is v as JSON.
func JSON(session uint64, t Type, v any) (Frame, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return Frame{}, fmt.Errorf("encoding %c payload: %w", t, err)
	}
	return Frame{Session: session, Type: t, Payload: p}, nil
}

// Reader reads frames, skipping bytes until the next magic.
type Reader struct {
	src io.Reader
	br  *bufio.Reader
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r, br: bufio.NewReaderSize(r, 64<<10)}
}

// Reset drops buffered bytes, for example after the peer went away.
func (r *Reader) Reset() { r.br.Reset(r.src) }

// Next returns the next well-formed frame. Errors are the underlying
// reader's (io.EOF when the peer is gone).
func (r *Reader) Next() (Frame, error) {
	for {
		if err := r.sync(); err != nil {
			return Frame{}, err
		}
		hdr, err := r.br.Peek(headerLen)
		if err != nil {
			return Frame{}, err
		}
		n := binary.BigEndian.Uint32(hdr[13:])
		if n > MaxPayload {
			_, _ = r.br.Discard(1) // not a frame: look for the next magic
			continue
		}
		f := Frame{Session: binary.BigEndian.Uint64(hdr[4:]), Type: Type(hdr[12])}
		_, _ = r.br.Discard(headerLen)
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r.br, f.Payload); err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return Frame{}, err
		}
		return f, nil
	}
}

// sync discards bytes until the buffer starts with Magic.
func (r *Reader) sync() error {
	for {
		b, err := r.br.Peek(len(Magic))
		if err != nil {
			return err
		}
		if bytes.Equal(b, []byte(Magic)) {
			return nil
		}
		skip := 1
		if i := bytes.IndexByte(b[1:], Magic[0]); i >= 0 {
			skip = i + 1
		} else {
			skip = len(b)
		}
		_, _ = r.br.Discard(skip)
	}
}
