package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// newRelay returns a server and an SSH transport that may log in to it.
func newRelay(t *testing.T) (*testServer, *SSH) {
	t.Helper()
	client := newSigner(t)
	srv := newTestServer(t, client.PublicKey())
	return srv, &SSH{Addr: srv.addr, User: "boxadmin", Signer: client, HostKey: srv.hostKey.PublicKey(), DialTimeout: waitLimit}
}

func request(argv ...string) protocol.Request {
	return protocol.Request{ProtocolVersion: protocol.Version, Argv: argv}
}

// summary renders an event for comparison; raw stderr lines are marked.
func summary(ev protocol.Event) string {
	if ev.Fields[RawSourceField] == RawSourceStderr {
		return "raw:" + ev.Message
	}
	return fmt.Sprintf("%s:%s:%s", ev.Type, ev.Level, ev.Message)
}

func TestSSHRun(t *testing.T) {
	tests := []struct {
		name       string
		argv       []string
		wantCode   int
		wantErr    string
		wantStdout string
		wantEvents []string
	}{
		{
			name: "exit code passes through", argv: []string{"exit", "3"}, wantCode: 3, wantStdout: "ok\n",
			wantEvents: []string{"step:info:checking", "progress:debug:", "warning:warn:careful"},
		},
		{
			name: "success", argv: []string{"exit", "0"}, wantStdout: "ok\n",
			wantEvents: []string{"step:info:checking", "progress:debug:", "warning:warn:careful"},
		},
		{
			name: "non-event stderr lines become log events", argv: []string{"garbage"},
			wantEvents: []string{
				"raw:panic: boom", "raw:goroutine 1 [running]:", "log:info:between",
				`raw:{"not":"an event"}`, "raw:no newline at the end",
			},
		},
		{
			name: "agent refusal", argv: []string{"frobnicate"}, wantCode: 64,
			wantEvents: []string{`raw:relay: unknown verb "frobnicate"`},
		},
		{name: "missing exit status", argv: []string{"noexit"}, wantErr: "without an exit status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, tr := newRelay(t)
			var stdout syncBuffer
			var events []string
			code, err := tr.Run(t.Context(), request(tt.argv...), nil, &stdout, func(ev protocol.Event) {
				if ev.Time.IsZero() {
					t.Errorf("event %q has no time", ev.Message)
				}
				events = append(events, summary(ev))
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Run = %d, %v; want an error containing %q", code, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			if got := stdout.String(); got != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tt.wantStdout)
			}
			if !slices.Equal(events, tt.wantEvents) {
				t.Errorf("events = %q, want %q", events, tt.wantEvents)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.requests) != 1 || !slices.Equal(srv.requests[0].Argv, tt.argv) || srv.requests[0].Options.Stdin {
				t.Errorf("agent read requests %+v, want one with argv %q and no stdin", srv.requests, tt.argv)
			}
		})
	}
}

// TestSSHRunStreamsStdin checks that stdin follows the request line as it
// is produced, not after the caller's reader has ended.
func TestSSHRunStreamsStdin(t *testing.T) {
	srv, tr := newRelay(t)
	pr, pw := io.Pipe()
	var stdout syncBuffer
	go func() {
		io.WriteString(pw, "first part\n")
		// The second part waits for the agent to have echoed the first.
		deadline := time.Now().Add(waitLimit)
		for !strings.Contains(stdout.String(), "first part") && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		io.WriteString(pw, "second part\n")
		pw.Close()
	}()
	code, err := tr.Run(t.Context(), request("echo"), pr, &stdout, nil)
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v; want 0, nil", code, err)
	}
	if got, want := stdout.String(), "first part\nsecond part\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.requests) != 1 || !srv.requests[0].Options.Stdin {
		t.Errorf("agent read %+v, want one request with options.stdin set", srv.requests)
	}
}

func TestSSHRunCommand(t *testing.T) {
	tests := []struct {
		name    string
		command string
		want    string
	}{
		{name: "default", want: "sudo -n /usr/local/sbin/hermes-box-agent relay"},
		{name: "configured", command: "/tmp/x/hermes-box-agent relay", want: "/tmp/x/hermes-box-agent relay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, tr := newRelay(t)
			tr.Command = tt.command
			if _, err := tr.Run(t.Context(), request("exit", "0"), nil, nil, nil); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if _, _, _, _, execs := srv.counts(); !slices.Equal(execs, []string{tt.want}) {
				t.Errorf("server ran %q, want [%q]", execs, tt.want)
			}
		})
	}
}

// TestSSHRunRefusals checks that a wrong host key or an unknown client key
// ends the call before any session exists, so no request byte is sent.
func TestSSHRunRefusals(t *testing.T) {
	tests := []struct {
		name          string
		wrongHostKey  bool
		wrongClient   bool
		wantIs        error
		wantMsg       string
		wantAuthTries bool
	}{
		{name: "wrong pinned host key", wrongHostKey: true, wantIs: ErrHostKeyMismatch, wantMsg: "host key does not match"},
		{name: "unauthorized client key", wrongClient: true, wantIs: ErrAuthRefused, wantMsg: "unable to authenticate", wantAuthTries: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, tr := newRelay(t)
			if tt.wrongHostKey {
				tr.HostKey = newSigner(t).PublicKey()
			}
			if tt.wrongClient {
				tr.Signer = newSigner(t)
			}
			code, err := tr.Run(t.Context(), request("exit", "0"), strings.NewReader("input"), nil, nil)
			if err == nil {
				t.Fatalf("Run = %d, nil; want an error", code)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q does not wrap %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "dialing "+srv.addr+": ") {
				t.Errorf("error = %q, want \"dialing %s: …%s…\"", err, srv.addr, tt.wantMsg)
			}
			handshakes, authTries, otherAuth, sessions, execs := srv.counts()
			if handshakes != 0 || sessions != 0 || len(execs) != 0 || otherAuth != 0 {
				t.Errorf("server saw %d handshakes, %d sessions, execs %q, %d password/keyboard attempts; want none",
					handshakes, sessions, execs, otherAuth)
			}
			if (authTries > 0) != tt.wantAuthTries {
				t.Errorf("server saw %d public-key attempts, want some: %t", authTries, tt.wantAuthTries)
			}
		})
	}
}

func TestSSHRunCancel(t *testing.T) {
	tests := []struct {
		name string
		// start returns the call's context and what the error must wrap.
		start func(t *testing.T, srv *testServer) (context.Context, error)
	}{
		{name: "cancel", start: func(t *testing.T, srv *testServer) (context.Context, error) {
			ctx, cancel := context.WithCancel(t.Context())
			t.Cleanup(cancel)
			go func() {
				select {
				case <-srv.execStarted:
					cancel()
				case <-ctx.Done():
				}
			}()
			return ctx, context.Canceled
		}},
		{name: "deadline", start: func(t *testing.T, _ *testServer) (context.Context, error) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx, context.DeadlineExceeded
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, tr := newRelay(t)
			ctx, want := tt.start(t, srv)
			done := make(chan error, 1)
			go func() {
				_, err := tr.Run(ctx, request("hang"), nil, nil, nil)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, want) {
					t.Errorf("Run error = %v, want %v", err, want)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return within %v of the cancellation", waitLimit)
			}
			if _, _, _, _, execs := srv.counts(); len(execs) != 1 {
				t.Errorf("server ran %q, want the call to have started", execs)
			}
		})
	}
}

// TestSSHRunBadInput checks refusals that need no server at all.
func TestSSHRunBadInput(t *testing.T) {
	srv, good := newRelay(t)
	tests := []struct {
		name    string
		edit    func(s *SSH)
		req     protocol.Request
		wantErr string
	}{
		{name: "no pinned host key", edit: func(s *SSH) { s.HostKey = nil }, req: request("exit", "0"), wantErr: "no pinned host key"},
		{name: "no client key", edit: func(s *SSH) { s.Signer = nil }, req: request("exit", "0"), wantErr: "no client key"},
		{name: "no user", edit: func(s *SSH) { s.User = "" }, req: request("exit", "0"), wantErr: "no user"},
		{name: "wrong protocol version", edit: func(*SSH) {}, req: protocol.Request{ProtocolVersion: 99, Argv: []string{"exit"}}, wantErr: "unsupported protocol version"},
		{name: "no verb", edit: func(*SSH) {}, req: request(), wantErr: "no verb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := *good
			tt.edit(&tr)
			if _, err := tr.Run(t.Context(), tt.req, nil, nil, nil); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if handshakes, authTries, _, _, _ := srv.counts(); handshakes != 0 || authTries != 0 {
		t.Errorf("server saw %d handshakes, %d auth attempts; want none", handshakes, authTries)
	}
}

func TestClientReusesConnection(t *testing.T) {
	srv, tr := newRelay(t)
	c, err := tr.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		code, err := c.Run(t.Context(), request("exit", fmt.Sprint(i)), nil, nil, nil)
		if err != nil || code != i {
			t.Fatalf("call %d: Run = %d, %v; want %d, nil", i, code, err, i)
		}
	}
	if handshakes, _, _, sessions, _ := srv.counts(); handshakes != 1 || sessions != 3 {
		t.Errorf("server saw %d connections and %d sessions, want 1 and 3", handshakes, sessions)
	}
	c.Close()
	if _, err := c.Run(t.Context(), request("exit", "0"), nil, nil, nil); err == nil {
		t.Error("Run on a closed client succeeded")
	}
}

func TestSSHRunLocalStreamFailures(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		stdin   io.Reader
		stdout  io.Writer
		wantErr string
	}{
		{name: "stdout fails", argv: []string{"exit", "0"}, stdout: failingWriter{}, wantErr: "writing stdout: disk full"},
		{name: "stdin fails", argv: []string{"echo"}, stdin: io.MultiReader(strings.NewReader("partial"), failingReader{}), wantErr: "reading stdin: device gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tr := newRelay(t)
			code, err := tr.Run(t.Context(), request(tt.argv...), tt.stdin, tt.stdout, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run = %d, %v; want an error containing %q", code, err, tt.wantErr)
			}
		})
	}
}

// TestDialStalledHandshake checks that a server that accepts but never
// speaks SSH cannot hold the dial past its timeout or its context.
func TestDialStalledHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	tests := []struct {
		name    string
		timeout time.Duration
		ctx     func(context.Context) (context.Context, context.CancelFunc)
	}{
		{name: "dial timeout", timeout: 200 * time.Millisecond, ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return ctx, func() {}
		}},
		{name: "context", timeout: waitLimit, ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 200*time.Millisecond)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &SSH{Addr: ln.Addr().String(), User: "u", Signer: newSigner(t), HostKey: newSigner(t).PublicKey(), DialTimeout: tt.timeout}
			ctx, cancel := tt.ctx(t.Context())
			defer cancel()
			start := time.Now()
			_, err := tr.Dial(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Dial error = %v, want a deadline error", err)
			}
			if elapsed := time.Since(start); elapsed > waitLimit/2 {
				t.Errorf("Dial took %v", elapsed)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("device gone") }
