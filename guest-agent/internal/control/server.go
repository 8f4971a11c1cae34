package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Handler answers requests; it is called concurrently.
type Handler interface {
	Handle(ctx context.Context, req Request) Response
}

// Server serves a Handler on the control socket.
type Server struct {
	ln     *net.UnixListener
	path   string
	h      Handler
	log    *slog.Logger
	allow  func(uid uint32) bool
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // orders conns.Add after Close's Wait began
	closed bool
	conns  sync.WaitGroup
}

// Listen creates the socket at path: its directory 0700, the socket 0600,
// a stale socket replaced, a live one (another boot) refused. Only root and
// this process's own user may connect.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the control socket's directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on the control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting the control socket: %w", err)
	}
	self := uint32(os.Geteuid())
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{ln: ln, path: path, h: h, log: log, ctx: ctx, cancel: cancel,
		allow: func(uid uint32) bool { return uid == 0 || uid == self }}, nil
}

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the control socket: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("control socket %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s is in use: another boot is running", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing the stale control socket: %w", err)
	}
	return nil
}

// Serve accepts connections until Close.
func (s *Server) Serve() error {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accepting on the control socket: %w", err)
		}
		if !s.track() {
			conn.Close()
			return nil
		}
		go func() {
			defer s.conns.Done()
			s.serve(conn)
		}()
	}
}

// track counts a new connection unless Close has begun: a WaitGroup's Add
// must not race its Wait.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns.Add(1)
	return true
}

// Close stops accepting, cancels running requests, waits for them, and
// removes the socket.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	s.conns.Wait()
	return err
}

func (s *Server) serve(conn *net.UnixConn) {
	defer conn.Close()
	uid, pid, err := peer(conn)
	if err != nil || !s.allow(uid) {
		s.log.Warn("control socket: refused a peer", "uid", uid, "pid", pid, "err", err)
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req Request
	var resp Response
	if err := readJSONLine(bufio.NewReader(conn), &req); errors.Is(err, io.EOF) {
		return // a liveness probe: connected and closed
	} else if err != nil {
		resp.Error = "bad request: " + err.Error()
	} else {
		_ = conn.SetReadDeadline(time.Time{})
		resp = s.h.Handle(s.ctx, req)
	}
	b, err := json.Marshal(resp)
	if err == nil {
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Write(append(b, '\n'))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		s.log.Warn("control socket: answering", "op", req.Op, "err", err)
	}
}

// peer returns the connecting process's uid and pid (SO_PEERCRED).
func peer(conn *net.UnixConn) (uid uint32, pid int32, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if credErr != nil {
		return 0, 0, fmt.Errorf("reading peer credentials: %w", credErr)
	}
	return cred.Uid, cred.Pid, nil
}
