package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// TestRelayHoldOutput: `snapshot apply` reports "apply-authorized-key
// started" as soon as it has read the part's header. Through `relay` the
// event is on stderr while the input is still open; through `relay
// --hold-output` nothing is written until the verb has returned, then the
// same events are.
func TestRelayHoldOutput(t *testing.T) {
	for _, tt := range []struct {
		name      string
		args      []string
		whileOpen bool // the event is on stderr before the input ends
	}{
		{"relay", []string{"relay"}, true},
		{"relay --hold-output", []string{"relay", "--hold-output"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			req := protocol.Request{ProtocolVersion: protocol.Version, Argv: []string{"snapshot", "apply"},
				Options: protocol.Options{Stdin: true}}
			if err := protocol.WriteRequest(&b, req); err != nil {
				t.Fatal(err)
			}
			key := protocol.ApplyPart{Name: protocol.ApplyPartKey, Size: 4, SHA256: strings.Repeat("0", 64)}
			b.WriteString(protocol.ApplyMagic + "\n" + key.Header() + "\n")
			pr, pw := io.Pipe()
			var out, errs syncBuffer
			done := make(chan int)
			go func() {
				done <- Run(context.Background(), append([]string{"--root", t.TempDir()}, tt.args...), Stdio{In: pr, Out: &out, Err: &errs})
			}()
			if _, err := pw.Write(b.Bytes()); err != nil {
				t.Fatal(err)
			}
			// io.Pipe's Write returns once the agent has taken the bytes:
			// it has parsed the header and reported the part before it
			// asks for the body.
			if _, err := pw.Write([]byte("ab")); err != nil {
				t.Fatal(err)
			}
			const event = `"step":"apply-authorized-key"`
			if got := strings.Contains(errs.String(), event); got != tt.whileOpen {
				t.Errorf("event on stderr while the input is open: %v, want %v (stderr %q)", got, tt.whileOpen, errs.String())
			}
			if !tt.whileOpen && errs.String()+out.String() != "" {
				t.Errorf("output before the input ended: %q %q", out.String(), errs.String())
			}
			pw.Close()
			if code := <-done; code == 0 {
				t.Errorf("a truncated stream applied (exit 0)")
			}
			if !strings.Contains(errs.String(), event) || !strings.Contains(errs.String(), `"level":"error"`) {
				t.Errorf("after the input ended stderr is %q, want the step and the error", errs.String())
			}
		})
	}
}

// TestRelayHoldOutputBounded: a verb that writes more than maxHeldOutput
// on a stream gets a limit error instead of growing the buffer; nothing is
// written before flush.
func TestRelayHoldOutputBounded(t *testing.T) {
	h := newHeldOutput()
	if _, err := h.out.Write(make([]byte, maxHeldOutput)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.out.Write([]byte("x")); !errors.Is(err, bounded.ErrLimit) {
		t.Fatalf("write past the bound: %v, want a limit error", err)
	}
	if _, err := h.err.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	h.flush(&out, &errs)
	if out.Len() != maxHeldOutput || errs.String() != "y" {
		t.Fatalf("flushed stdout %d bytes, stderr %q", out.Len(), errs.String())
	}
}
