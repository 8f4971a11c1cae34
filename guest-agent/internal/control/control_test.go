package control

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-box/hermes-box/shared/health"
)

type fakeHandler struct{}

func (fakeHandler) Handle(_ context.Context, req Request) Response {
	if req.Op != OpStatus {
		return Response{Error: "unsupported op " + string(req.Op)}
	}
	return Response{Services: []Service{{Service: health.Service{Name: "sshd", State: health.ServiceRunning, PID: 42}, Description: "pid 42"}}}
}

func serve(t *testing.T, allow func(uint32) bool) string {
	t.Helper()
	path := Socket(t.TempDir())
	s, err := Listen(path, fakeHandler{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if allow != nil {
		s.allow = allow
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return path
}

func TestCallAndModes(t *testing.T) {
	path := serve(t, nil)
	for p, want := range map[string]os.FileMode{path: os.ModeSocket | 0o600, filepath.Dir(path): os.ModeDir | 0o700} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	resp, err := Call(t.Context(), path, Request{Op: OpStatus})
	if err != nil || len(resp.Services) != 1 || resp.Services[0].Name != "sshd" || resp.Services[0].Description != "pid 42" {
		t.Fatalf("got %+v, %v", resp, err)
	}
	resp, err = Call(t.Context(), path, Request{Op: OpStart, Name: "x"})
	if !errors.Is(err, ErrRefused) || resp.Error != "unsupported op start" {
		t.Fatalf("got %+v, %v; want a refusal", resp, err)
	}
}

func TestBadRequestsAndPeers(t *testing.T) {
	var refused atomic.Bool
	path := serve(t, func(uint32) bool { return !refused.Load() })
	raw := func(line string) string {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, line)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := raw(`{"op":"status","extra":1}` + "\n"); !strings.Contains(got, `"error":"bad request`) {
		t.Fatalf("unknown field answered %q", got)
	}
	refused.Store(true)
	if got := raw(`{"op":"status"}` + "\n"); got != "" {
		t.Fatalf("refused peer got an answer: %q", got)
	}
}

func TestNotRunningAndStaleSockets(t *testing.T) {
	dir := t.TempDir()
	if _, err := Call(t.Context(), Socket(dir), Request{Op: OpStatus}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no socket: %v", err)
	}
	// A stale socket (no listener) is replaced.
	path := Socket(dir)
	os.MkdirAll(filepath.Dir(path), 0o700)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Call(t.Context(), path, Request{Op: OpStatus}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stale socket: %v", err)
	}
	s, err := Listen(path, fakeHandler{}, slog.Default())
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	go s.Serve()
	defer s.Close()
	// A live one is not.
	if _, err := Listen(path, fakeHandler{}, slog.Default()); err == nil || !strings.Contains(err.Error(), "another boot is running") {
		t.Fatalf("second listener: %v", err)
	}
	// A non-socket in the way is not removed.
	other := filepath.Join(dir, "file")
	os.WriteFile(other, nil, 0o600)
	if _, err := Listen(other, fakeHandler{}, slog.Default()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("file in the way: %v", err)
	}
}
