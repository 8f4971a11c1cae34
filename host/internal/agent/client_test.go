package agent

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
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

// floodExecer stands in for smolvm exec: the verb's stderr is n blank
// lines, which decode to no event at all.
type floodExecer struct{ n int }

func (f floodExecer) Exec(ctx context.Context, s smolvm.ExecSpec) (smolvm.Result, error) {
	block := []byte(strings.Repeat("\n", 32<<10))
	for sent := 0; sent < f.n; sent += len(block) {
		if _, err := s.Stderr.Write(block); err != nil {
			return smolvm.Result{}, err
		}
		if ctx.Err() != nil {
			return smolvm.Result{}, ctx.Err()
		}
	}
	return smolvm.Result{}, nil
}

// TestCallBounds: every verb's answer is cut at its stdout cap and its
// stderr at its stderr cap in raw bytes (blank lines count), each an error
// naming the verb.
func TestCallBounds(t *testing.T) {
	for _, v := range Verbs {
		t.Run(v.Name()+" "+strings.Join(v.Args, " "), func(t *testing.T) {
			t.Parallel()
			tr := &relay.Exec{Machine: "m", Execer: floodExecer{n: int(v.Stderr) + 64<<10}, Direct: !v.Stdin}
			err := New(tr, func(protocol.Event) {}).Call(t.Context(), v, nil, stdinFor(v), nil)
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
// shortened) or its idle deadline, with an error naming it and the next
// step to run; a follow mode has neither.
func TestCallDeadline(t *testing.T) {
	for _, v := range Verbs {
		if v.Follow() {
			if v.Deadline != 0 || v.Idle != 0 {
				t.Errorf("%s has a deadline", v.Name())
			}
			continue
		}
		t.Run(v.Name(), func(t *testing.T) {
			t.Parallel()
			err := Shortened(New(&floodTransport{hang: true}, nil), 300*time.Millisecond).Call(t.Context(), v, nil, stdinFor(v), nil)
			want := "did not answer agent " + v.Name() + " within 300ms"
			if v.Idle > 0 {
				want = "did not answer agent " + v.Name() + ": no progress for 150ms"
			}
			if err == nil || !strings.Contains(err.Error(), want) || userr.Hint(err) != NextStep {
				t.Errorf("hang: %v (hint %q), want %q", err, userr.Hint(err), want)
			}
		})
	}
}

// beatTransport sends a heartbeat every beat, beats times, then answers;
// or, with hang, stops beating and waits for its context.
type beatTransport struct {
	beat  time.Duration
	beats int
	hang  bool
}

func (b *beatTransport) Run(ctx context.Context, _ protocol.Request, _ io.Reader, _ io.Writer, onEvent func(protocol.Event)) (int, error) {
	for range b.beats {
		select {
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		case <-time.After(b.beat):
			onEvent(protocol.Event{Type: protocol.EventProgress, Step: "apt", Message: "still running"})
		}
	}
	if b.hang {
		<-ctx.Done()
		return -1, context.Cause(ctx)
	}
	return 0, nil
}

// TestCallIdle: a long verb whose box keeps beating runs past its idle
// deadline; once the beats stop it ends at the idle deadline, long before
// its deadline.
func TestCallIdle(t *testing.T) {
	const idle = 400 * time.Millisecond
	v := &Verb{Argv: []string{"provision"}, Result: "none", Stdout: mib, Stderr: mib, Deadline: time.Hour, Idle: idle}
	c := &Client{dial: func() (relay.Transport, error) { return &beatTransport{beat: idle / 4, beats: 12}, nil }}
	if err := c.Call(t.Context(), v, nil, nil, nil); err != nil {
		t.Fatalf("a beating box, %v past its idle deadline: %v", 3*idle, err)
	}
	c.dial = func() (relay.Transport, error) { return &beatTransport{beat: idle / 4, beats: 4, hang: true}, nil }
	start := time.Now()
	err := c.Call(t.Context(), v, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no progress for 400ms") || userr.Hint(err) != NextStep {
		t.Fatalf("a box that stopped beating: %v", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("ended after %v", took)
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
