//go:build linux

package main

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// port serves one virtio-serial control port: one session at a time.
type port struct {
	path string
	fd   int
	wmu  sync.Mutex
}

// session is the request in progress on a port.
type session struct {
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	in     chan wire.Frame
	done   chan struct{}
	seen   atomic.Int64 // unix nanoseconds of the last frame from the host
	busy   atomic.Bool  // the reader is blocked handing a frame to the session
}

// deliver hands a frame to the session; heartbeats only mark it alive.
func (s *session) deliver(f wire.Frame) {
	s.seen.Store(time.Now().UnixNano())
	if f.Type == wire.Heartbeat {
		return
	}
	s.busy.Store(true)
	defer s.busy.Store(false)
	select {
	case s.in <- f:
	case <-s.done:
	}
}

// watch cancels the session once its host has been silent too long.
func (s *session) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			idle := time.Since(time.Unix(0, s.seen.Load()))
			if idle > wire.SessionTimeout && !s.busy.Load() {
				console("session %x: host silent for %s; cancelling", s.id, idle.Round(time.Second))
				s.cancel()
				return
			}
		}
	}
}

func newPort(path string) *port { return &port{path: path, fd: -1} }

// fdReader reads the port with blocking read(2). A read of 0 bytes means
// no host is connected right now; it is not an end of stream (a new host may
// connect, and the close event may even be seen after the next host's
// data), so the reader waits and reads again.
type fdReader struct{ fd int }

func (r fdReader) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(r.fd, b)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			return 0, err
		case n == 0:
			time.Sleep(50 * time.Millisecond)
		default:
			return n, nil
		}
	}
}

// loop reads frames forever. A frame of a new session ends the current one
// (the host takes a port only after the previous user let go of it); a
// watchdog ends a session whose host went silent.
func (p *port) loop() {
	for p.fd < 0 {
		fd, err := syscall.Open(p.path, syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
		if err != nil {
			console("open %s: %v", p.path, err)
			time.Sleep(time.Second)
			continue
		}
		p.fd = fd
	}
	r := wire.NewReader(fdReader{p.fd})
	var cur *session
	for {
		f, err := r.Next()
		if err != nil {
			console("read %s: %v", p.path, err)
			r.Reset()
			time.Sleep(time.Second)
			continue
		}
		if cur != nil && f.Session == cur.id {
			cur.deliver(f)
			continue
		}
		if cur != nil {
			cur.cancel()
		}
		cur = p.start(f)
	}
}

// start begins the session a request frame opens.
func (p *port) start(f wire.Frame) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{id: f.Session, ctx: ctx, cancel: cancel, in: make(chan wire.Frame, 64), done: make(chan struct{})}
	s.seen.Store(time.Now().UnixNano())
	var handler func(*session, []byte)
	switch f.Type {
	case wire.Ping:
		p.send(s, wire.Pong, nil)
	case wire.Exec:
		handler = p.exec
	case wire.Boot:
		handler = p.boot
	case wire.Put:
		handler = p.put
	case wire.Get:
		handler = p.get
	case wire.Poweroff:
		p.send(s, wire.OK, nil)
		go func() {
			time.Sleep(100 * time.Millisecond) // let the OK reach the host
			shutdown()
		}()
	default:
		return nil // a frame of an earlier, aborted session
	}
	if handler == nil {
		close(s.done)
		return s
	}
	go s.watch()
	go func() {
		defer close(s.done)
		defer cancel()
		handler(s, f.Payload)
	}()
	return s
}

// send writes one frame of s unless s was cancelled.
func (p *port) send(s *session, t wire.Type, payload []byte) {
	if s.ctx.Err() != nil {
		return
	}
	b, err := wire.Encode(wire.Frame{Session: s.id, Type: t, Payload: payload})
	if err != nil {
		console("encode: %v", err)
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for len(b) > 0 {
		n, err := syscall.Write(p.fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			console("write %s: %v", p.path, err)
			return
		}
		b = b[n:]
	}
}

// sendJSON sends v as the payload of a t frame.
func (p *port) sendJSON(s *session, t wire.Type, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.fail(s, err)
		return
	}
	p.send(s, t, b)
}

// fail ends s with an error message.
func (p *port) fail(s *session, err error) {
	p.send(s, wire.Fail, []byte(err.Error()))
}
