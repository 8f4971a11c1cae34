package relay

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// recordingRequester records the global requests the pump sends.
type recordingRequester struct {
	mu   sync.Mutex
	sent []string
	seen chan struct{}
}

func (r *recordingRequester) SendRequest(name string, wantReply bool, _ []byte) (bool, []byte, error) {
	r.mu.Lock()
	r.sent = append(r.sent, name)
	r.mu.Unlock()
	if wantReply {
		panic("the pump must not wait for a reply")
	}
	r.seen <- struct{}{}
	return false, nil, nil
}

func (r *recordingRequester) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// TestAckPump: while it runs, every read that returns bytes leads to one
// keepalive (several reads before it is sent share it); after stop, reads
// send nothing and the sending goroutine is gone.
func TestAckPump(t *testing.T) {
	local, remote := net.Pipe()
	defer local.Close()
	defer remote.Close()
	p := newAckPump(local)
	r := &recordingRequester{seen: make(chan struct{}, 8)}
	read := func(payload string) {
		t.Helper()
		go remote.Write([]byte(payload))
		buf := make([]byte, len(payload))
		if _, err := p.Read(buf); err != nil || !bytes.Equal(buf, []byte(payload)) {
			t.Fatalf("read %q, %v; want %q", buf, err, payload)
		}
	}
	read("before start") // the handshake's reads ask for nothing
	p.start(r)
	for _, payload := range []string{"host-key notice", "channel confirmation"} {
		read(payload)
		select {
		case <-r.seen:
		case <-time.After(waitLimit):
			t.Fatalf("no keepalive after reading %q", payload)
		}
	}
	if got := r.count(); got != 2 || r.sent[0] != keepaliveRequest || p.kicks.Load() != 2 {
		t.Fatalf("sent %q after %d kicks, want 2 %s", r.sent, p.kicks.Load(), keepaliveRequest)
	}
	p.stop()
	p.stop() // a second stop is harmless
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatal("the pump's goroutine did not end at stop")
	}
	read("after the first session")
	if got := r.count(); got != 2 || p.kicks.Load() != 2 {
		t.Fatalf("after stop: %d keepalives, %d kicks; want 2 and 2", got, p.kicks.Load())
	}
	var never *ackPump
	never.stop() // a Client without a pump
}

// TestAckPumpOnOpenSSH: Debian's sshd sends its host-key notice after
// authentication, before it confirms a channel, so the pump answers at least
// one read before the first session starts; sshd takes the keepalive
// without complaint, the pump stops with that session, and the connection
// goes on serving calls.
func TestAckPumpOnOpenSSH(t *testing.T) {
	f := newSSHDFixture(t)
	c := dialAgent(t, f)
	for i := range 2 {
		if r := relayHealth(t, c); r.Agent.Version == "" {
			t.Fatalf("call %d: report without an agent version: %+v", i, r)
		}
		if c.pump.active.Load() {
			t.Fatalf("call %d: the pump still runs after a session started", i)
		}
	}
	if c.pump.kicks.Load() == 0 {
		t.Fatal("no read asked for a keepalive between authentication and the first session")
	}
	select {
	case <-c.pump.exited:
	case <-time.After(waitLimit):
		t.Fatal("the pump's goroutine did not end")
	}
}
