package relay

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"golang.org/x/crypto/ssh"
)

// waitLimit bounds every wait in these tests.
const waitLimit = 10 * time.Second

// testServer is an in-process SSH server that runs a fake agent for every
// "exec" request and counts what clients got to do.
type testServer struct {
	addr    string
	hostKey ssh.Signer

	mu          sync.Mutex
	handshakes  int // completed handshakes (key exchange and auth)
	authTries   int // public-key attempts seen
	otherAuth   int // password or keyboard-interactive attempts (must stay 0)
	sessions    int // session channels opened
	execs       []string
	requests    []protocol.Request
	execStarted chan struct{} // receives once per exec
}

// newTestServer serves until the test ends; only authorized may log in.
func newTestServer(t *testing.T, authorized ssh.PublicKey) *testServer {
	t.Helper()
	s := &testServer{hostKey: newSigner(t), execStarted: make(chan struct{}, 16)}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			s.authTries++
			s.mu.Unlock()
			if string(key.Marshal()) != string(authorized.Marshal()) {
				return nil, errors.New("unknown key")
			}
			return &ssh.Permissions{}, nil
		},
		// Offered so that the test can see the client never uses them.
		PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) {
			s.countOtherAuth()
			return nil, errors.New("no passwords")
		},
		KeyboardInteractiveCallback: func(ssh.ConnMetadata, ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			s.countOtherAuth()
			return nil, errors.New("no keyboard-interactive")
		},
	}
	config.AddHostKey(s.hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 64)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			wg.Go(func() { s.serveConn(c, config) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		for len(conns) > 0 {
			(<-conns).Close()
		}
		wg.Wait()
	})
	return s
}

func (s *testServer) countOtherAuth() {
	s.mu.Lock()
	s.otherAuth++
	s.mu.Unlock()
}

// counts returns a snapshot of the counters.
func (s *testServer) counts() (handshakes, authTries, otherAuth, sessions int, execs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshakes, s.authTries, s.otherAuth, s.sessions, append([]string(nil), s.execs...)
}

func (s *testServer) serveConn(c net.Conn, config *ssh.ServerConfig) {
	defer c.Close()
	sconn, chans, reqs, err := ssh.NewServerConn(c, config)
	if err != nil {
		return
	}
	defer sconn.Close()
	s.mu.Lock()
	s.handshakes++
	s.mu.Unlock()
	go ssh.DiscardRequests(reqs)
	closed := make(chan struct{})
	go func() { sconn.Wait(); close(closed) }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
		wg.Go(func() { s.serveSession(ch, chReqs, closed) })
	}
}

// serveSession answers "exec" by running the fake agent and sending its
// exit status; every other request is refused.
func (s *testServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, closed <-chan struct{}) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(false, nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			req.Reply(false, nil)
			continue
		}
		s.mu.Lock()
		s.execs = append(s.execs, payload.Command)
		s.mu.Unlock()
		req.Reply(true, nil)
		select {
		case s.execStarted <- struct{}{}:
		default:
		}
		go ssh.DiscardRequests(reqs)
		code := s.fakeAgent(ch, closed)
		if code >= 0 {
			status := struct{ Status uint32 }{uint32(code)}
			ch.SendRequest("exit-status", false, ssh.Marshal(&status))
		}
		return
	}
}

// fakeAgent behaves like `hermes-box-agent relay` for a few test verbs and
// returns the exit status to send, or -1 to send none.
//
//	exit N    stdout "ok", one event per level, exit N
//	echo      stdout: every stdin byte after the request; exit 0
//	garbage   stderr: a valid event between non-event lines; exit 0
//	hang      blocks until the connection closes
//	noexit    ends the session without an exit status
func (s *testServer) fakeAgent(ch ssh.Channel, closed <-chan struct{}) int {
	in := bufio.NewReader(ch)
	req, err := protocol.ReadRequest(in)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "relay: %v\n", err)
		return 2
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	events := protocol.NewEventWriter(ch.Stderr(), protocol.LevelDebug)
	switch req.Argv[0] {
	case "exit":
		code, _ := strconv.Atoi(req.Argv[1])
		io.WriteString(ch, "ok\n")
		events.Emit(protocol.Event{Type: protocol.EventStep, Step: "check", State: protocol.StepStarted, Message: "checking"})
		events.Emit(protocol.Event{Type: protocol.EventProgress, Level: protocol.LevelDebug, Progress: &protocol.Progress{Current: 1, Total: 2}})
		events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn, Message: "careful"})
		return code
	case "echo":
		io.Copy(ch, in)
		return 0
	case "garbage":
		io.WriteString(ch.Stderr(), "panic: boom\n\ngoroutine 1 [running]:\r\n")
		events.Emit(protocol.Event{Type: protocol.EventLog, Message: "between"})
		io.WriteString(ch.Stderr(), "{\"not\":\"an event\"}\nno newline at the end")
		return 0
	case "hang":
		<-closed
		return -1
	case "noexit":
		return -1
	}
	fmt.Fprintf(ch.Stderr(), "relay: unknown verb %q\n", req.Argv[0])
	return 64
}

// newSigner returns a fresh ed25519 signer.
func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
