package relay

import (
	"net"
	"sync"
	"sync/atomic"
)

// OpenSSH's sshd leaves Nagle's algorithm on until a session starts. Right
// after authentication it writes its host-key notice, the authorized key's
// debug notes and the channel confirmations as separate small writes, and
// the kernel holds each back until the one before is acknowledged. A client
// that is only waiting has nothing to send, so its acknowledgement waits for
// the delayed-ACK timer (40 ms on Linux, longer on macOS), once or twice per
// connection: most of a status call's time. Until the first session starts,
// ackPump answers every read with an SSH keepalive (a global request that
// wants no reply), so the acknowledgement leaves at once. After that sshd
// has set TCP_NODELAY and the pump stops.

// ackPump counts reads on a connection while active and sends a keepalive
// after each.
type ackPump struct {
	net.Conn
	active atomic.Bool
	kick   chan struct{}
	done   chan struct{}
	once   sync.Once
	kicks  atomic.Int64  // reads that asked for a keepalive
	exited chan struct{} // closed when the sending goroutine has returned
}

// keepaliveRequest is the request OpenSSH's own client sends as a keepalive;
// servers ignore it when no reply is wanted.
const keepaliveRequest = "keepalive@openssh.com"

func newAckPump(conn net.Conn) *ackPump {
	return &ackPump{Conn: conn, kick: make(chan struct{}, 1), done: make(chan struct{}),
		exited: make(chan struct{})}
}

// Read reads from the connection and, while the pump runs, asks for a
// keepalive to be sent.
func (p *ackPump) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	if n > 0 && p.active.Load() {
		p.kicks.Add(1)
		select {
		case p.kick <- struct{}{}:
		default: // one is already due; it acknowledges these bytes too
		}
	}
	return n, err
}

// requester is the part of an SSH connection the pump uses.
type requester interface {
	SendRequest(name string, wantReply bool, payload []byte) (bool, []byte, error)
}

// start sends a keepalive on conn after reads until stop. Reads happen on
// the SSH transport's reader, which must not block, so the sending is done
// by a goroutine of its own.
func (p *ackPump) start(conn requester) {
	p.active.Store(true)
	go func() {
		defer close(p.exited)
		for {
			select {
			case <-p.done:
				return
			case <-p.kick:
			}
			if _, _, err := conn.SendRequest(keepaliveRequest, false, nil); err != nil {
				return
			}
		}
	}()
}

// stop ends the pump; later reads send nothing. It may be called more than
// once.
func (p *ackPump) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		p.active.Store(false)
		close(p.done)
	})
}
