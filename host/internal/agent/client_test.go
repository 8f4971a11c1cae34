package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// floodTransport writes n bytes of stdout in chunks, then events, or hangs
// until its context ends.
type floodTransport struct {
	stdout int
	events int
	hang   bool
	argv   []string
}

func (f *floodTransport) Run(ctx context.Context, req protocol.Request, _ io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	f.argv = req.Argv
	chunk := []byte(strings.Repeat("x", 32<<10))
	for n := 0; n < f.stdout; n += len(chunk) {
		if _, err := stdout.Write(chunk); err != nil {
			return -1, err
		}
	}
	for range f.events {
		if ctx.Err() != nil {
			return -1, context.Cause(ctx)
		}
		onEvent(protocol.Event{Type: protocol.EventLog, Message: strings.Repeat("e", 1<<10)})
	}
	if f.hang {
		<-ctx.Done()
		return -1, context.Cause(ctx)
	}
	return 0, nil
}

// stdinFor is input for v when it takes some.
func stdinFor(v *Verb) io.Reader {
	if v.Stdin {
		return strings.NewReader("{}")
	}
	return nil
}

// TestCallBounds: every verb's answer is cut at its stdout cap and its
// events at its stderr cap, each an error naming the verb.
func TestCallBounds(t *testing.T) {
	for _, v := range Verbs {
		t.Run(v.Name()+" "+strings.Join(v.Args, " "), func(t *testing.T) {
			t.Parallel()
			c := New(&floodTransport{events: int(v.Stderr>>10) + 10}, func(protocol.Event) {})
			err := c.Call(t.Context(), v, nil, stdinFor(v), nil)
			if !errors.Is(err, bounded.ErrLimit) || !strings.Contains(err.Error(), "events (stderr) of agent "+v.Name()) {
				t.Errorf("stderr flood: %v", err)
			}
			if v.Stdout > 0 && v.Stdout <= 1<<30 {
				err = New(&floodTransport{stdout: int(v.Stdout) + 1}, nil).Call(t.Context(), v, nil, stdinFor(v), nil)
				if !errors.Is(err, bounded.ErrLimit) || !strings.Contains(err.Error(), "answer of agent "+v.Name()) {
					t.Errorf("stdout flood: %v", err)
				}
			}
		})
	}
}

// TestCallDeadline: a verb that never answers ends at its deadline (here
// shortened by the test hook) with an error naming it and the next step
// to run; a follow mode has none.
func TestCallDeadline(t *testing.T) {
	old := deadlineHook
	deadlineHook = "HBX_UNIT_AGENT_DEADLINE"
	t.Cleanup(func() { deadlineHook = old })
	// Not t.Setenv: the subtests run in parallel, and nothing else in this
	// package's tests reads the variable.
	os.Setenv(deadlineHook, "300ms")
	t.Cleanup(func() { os.Unsetenv(deadlineHook) })
	for _, v := range Verbs {
		if v.Follow() {
			if deadline(v) != 0 {
				t.Errorf("%s has a deadline", v.Name())
			}
			continue
		}
		t.Run(v.Name(), func(t *testing.T) {
			t.Parallel()
			err := New(&floodTransport{hang: true}, nil).Call(t.Context(), v, nil, stdinFor(v), nil)
			if err == nil || !strings.Contains(err.Error(), "did not answer agent "+v.Name()+" within 300ms") || userr.Hint(err) != NextStep {
				t.Errorf("hang: %v (hint %q)", err, userr.Hint(err))
			}
		})
	}
}

// TestCallStdinAsDeclared: a call gives input exactly when its verb takes it.
func TestCallStdinAsDeclared(t *testing.T) {
	tr := &floodTransport{}
	if err := New(tr, nil).Call(t.Context(), Health, nil, strings.NewReader("x"), nil); err == nil {
		t.Error("input to health was sent")
	}
	if err := New(tr, nil).Call(t.Context(), SecretsSet, nil, nil, nil); err == nil {
		t.Error("secrets set without input was sent")
	}
	if err := New(tr, nil).Call(t.Context(), ServicesStop, []string{"all"}, nil, nil); err != nil || strings.Join(tr.argv, " ") != "services stop all" {
		t.Errorf("services stop all: %v %q", err, tr.argv)
	}
}

// TestVerbTable: every verb has its caps, and a deadline unless it follows.
func TestVerbTable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Verbs {
		key := v.Name() + " " + strings.Join(v.Args, " ")
		if seen[key] {
			t.Errorf("%s declared twice", key)
		}
		seen[key] = true
		if v.Stderr <= 0 || (v.Stdout <= 0) != v.Follow() || v.Result == "" {
			t.Errorf("%s: caps %d/%d, deadline %v, result %q", key, v.Stdout, v.Stderr, v.Deadline, v.Result)
		}
		if v.Follow() && !slices.Contains(v.Args, "-f") {
			t.Errorf("%s has no deadline but is no follow mode", key)
		}
	}
}
