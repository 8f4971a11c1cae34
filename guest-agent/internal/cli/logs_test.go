package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name, body string
		n          int
		want       string
	}{
		{"last two", "a\nb\nc\n", 2, "b\nc\n"},
		{"more than there are", "a\nb\n", 10, "a\nb\n"},
		{"none", "a\nb\n", 0, ""},
		{"unterminated last line", "a\nb\nc", 2, "b\nc"},
		{"empty file", "", 3, ""},
		{"long file", strings.Repeat("x\n", 100000) + "end\n", 1, "end\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "log")
			os.WriteFile(p, []byte(tt.body), 0o600)
			f, _ := os.Open(p)
			defer f.Close()
			var out bytes.Buffer
			if err := tail(f, &out, tt.n); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestFollowAcrossRotation(t *testing.T) {
	followPoll = 10 * time.Millisecond
	p := filepath.Join(t.TempDir(), "log")
	os.WriteFile(p, []byte("old\n"), 0o600)
	f, _ := os.Open(p)
	var out syncBuffer
	if err := tail(f, &out, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- followFile(ctx, &f, p, &out) }()
	appendTo := func(s string) {
		fh, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		fh.WriteString(s)
		fh.Close()
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.HasSuffix(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("output %q, waiting for %q", out.String(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	appendTo("one\n")
	wait("one\n")
	os.Rename(p, p+".1") // rotation: the old file gets a last line, a new one starts
	appendTo("two\n")
	wait("two\n")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := out.String(); got != "old\none\ntwo\n" {
		t.Fatalf("followed %q", got)
	}
}

func TestLogsWithoutBootUsesTheBoxTable(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "workspace/hermes-home/logs/hermes-gateway.log")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("1\n2\n3\n"), 0o600)
	code, out, errs := run(t, request("logs", "hermes", "-n", "2"), "--root", root, "relay")
	if code != 0 || out != "2\n3\n" {
		t.Fatalf("exit %d, %q: %s", code, out, errs)
	}
	if code, _, errs := run(t, request("logs", "nope"), "--root", root, "relay"); code != 1 || !strings.Contains(errs, `no service \"nope\"`) {
		t.Fatalf("unknown service: exit %d: %s", code, errs)
	}
	if code, _, _ := run(t, request("logs"), "--root", root, "relay"); code != 2 {
		t.Fatalf("no name: exit %d, want 2", code)
	}
}

// TestLogsShowEscapes: a service log carrying terminal escapes (Hermes logs
// the commands it runs) is printed with the escapes made visible.
func TestLogsShowEscapes(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "workspace/hermes-home/logs/hermes-gateway.log")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("ran \x1b]52;c;cHduZWQ=\x07\n\x1b[2J\x1b[Hall checks passed\xff\n"), 0o600)
	code, out, errs := run(t, request("logs", "hermes", "-n", "2"), "--root", root, "relay")
	want := "ran \\x1b]52;c;cHduZWQ=\\x07\n\\x1b[2J\\x1b[Hall checks passed\uFFFD\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, %q, want %q: %s", code, out, want, errs)
	}
}
