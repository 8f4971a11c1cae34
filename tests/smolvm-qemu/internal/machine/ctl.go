package machine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// ctlConn is one session with the guest init over a control port. The port
// is held with a flock on a lock file beside its socket, so concurrent
// stand-in processes use different ports.
type ctlConn struct {
	conn    net.Conn
	r       *wire.Reader
	session uint64
	lock    *os.File
	stop    func() bool
	wmu     sync.Mutex
	quit    chan struct{}
}

// errPortsBusy means every control port is in use.
var errPortsBusy = errors.New("all control ports are busy")

// dialCtl takes a free control port of the machine in dir, waiting up to
// wait for one, and opens a session on it. Cancelling ctx closes it.
func dialCtl(ctx context.Context, dir string, wait time.Duration) (*ctlConn, error) {
	deadline := time.Now().Add(wait)
	for {
		for i := range CtlPorts {
			c, err := tryPort(ctx, dir, i)
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, errPortsBusy) {
				return nil, err
			}
		}
		if time.Now().After(deadline) {
			return nil, errPortsBusy
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tryPort(ctx context.Context, dir string, i int) (*ctlConn, error) {
	sock := ctlSocket(dir, i)
	if len(sock) >= 108 {
		return nil, fmt.Errorf("control socket path %s is too long for a unix socket; use a shorter SMOLVM_QEMU_STATE", sock)
	}
	lock, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("c%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control port lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, errPortsBusy
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("control port %d: %w", i, err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := &ctlConn{conn: conn, r: wire.NewReader(conn), session: binary.BigEndian.Uint64(id[:]), lock: lock, quit: make(chan struct{})}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	go c.heartbeat()
	return c, nil
}

// heartbeat tells the guest this session's host is still there.
func (c *ctlConn) heartbeat() {
	t := time.NewTicker(wire.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			if c.send(wire.Heartbeat, nil) != nil {
				return
			}
		}
	}
}

// Close ends the session; the guest cancels whatever it still runs.
func (c *ctlConn) Close() {
	close(c.quit)
	c.stop()
	c.conn.Close()
	c.lock.Close()
}

// send writes one frame of this session.
func (c *ctlConn) send(t wire.Type, payload []byte) error {
	b, err := wire.Encode(wire.Frame{Session: c.session, Type: t, Payload: payload})
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.conn.Write(b)
	return err
}

// sendJSON writes v as the payload of a t frame.
func (c *ctlConn) sendJSON(t wire.Type, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(t, b)
}

// recv returns the next frame of this session, skipping stale frames of
// earlier ones. A Fail frame becomes an error.
func (c *ctlConn) recv() (wire.Frame, error) {
	for {
		f, err := c.r.Next()
		if err != nil {
			return f, fmt.Errorf("control channel: %w", err)
		}
		if f.Session != c.session {
			continue
		}
		if f.Type == wire.Fail {
			return f, errors.New(string(f.Payload))
		}
		return f, nil
	}
}

// expect receives one frame and checks its type.
func (c *ctlConn) expect(t wire.Type) (wire.Frame, error) {
	f, err := c.recv()
	if err != nil {
		return f, err
	}
	if f.Type != t {
		return f, fmt.Errorf("control channel: got frame %q, want %q", f.Type, t)
	}
	return f, nil
}

// ping checks that the guest init answers within timeout.
func ping(ctx context.Context, dir string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dialCtl(ctx, dir, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.send(wire.Ping, nil); err != nil {
		return err
	}
	_, err = c.expect(wire.Pong)
	if ctx.Err() != nil {
		return fmt.Errorf("guest init did not answer within %s", timeout)
	}
	return err
}

// waitReady pings the guest until it answers, QEMU dies or timeout passes.
func waitReady(ctx context.Context, dir string, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ping(ctx, dir, 2*time.Second)
		if err == nil {
			return nil
		}
		if !alive(pid, dir) {
			return fmt.Errorf("qemu exited during boot (see %s)", filepath.Join(dir, consoleFile))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("guest not ready after %s: %v (see %s)", timeout, err, filepath.Join(dir, consoleFile))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
