package box

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// failingBox is a transport whose every call fails with the same error
// until ok is reached (calls counted), then answers as scriptedBox's ready
// box does.
type failingBox struct {
	scriptedBox
	err   error
	until int // the call that answers; 0: none
	n     int
}

func (f *failingBox) Run(ctx context.Context, req protocol.Request, in io.Reader, stdout io.Writer, ev func(protocol.Event)) (int, error) {
	f.n++
	if f.until == 0 || f.n < f.until {
		return -1, f.err
	}
	return f.scriptedBox.Run(ctx, req, in, stdout, ev)
}

// TestWaitEndsOnTheSameFailure: a readiness wait whose calls all fail the
// same way (here the relay's session ends the same way on every try) ends
// once sameFailureTries of them over sameFailureSpan did, with that error
// and a next step, not at its startup deadline (20 min, 2 h with the
// Executor); a box failing alike for less than the span (booting), then
// ready, is waited for. The synctest bubble's clock runs the waits in no
// time.
func TestWaitEndsOnTheSameFailure(t *testing.T) {
	same := errors.New("relaying health: remote command ended without an exit status (connection lost?)")
	span := int(sameFailureSpan / defaultTimings().pollInterval)
	waits := map[string]func(ctx context.Context, b *Box, tr *failingBox) error{
		"health": func(ctx context.Context, b *Box, tr *failingBox) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Hour) // the Executor's deadline
			defer cancel()
			return waitHealthy(ctx, b, nil, tr)
		},
		"version": func(ctx context.Context, b *Box, tr *failingBox) error {
			b.timing.startupDeadline = 2 * time.Hour
			return waitAnswers(ctx, b, nil, "box", tr)
		},
	}
	for name, wait := range waits {
		for _, tc := range []struct {
			name  string
			until int
			ends  bool
		}{
			{"always", 0, true},
			{"for 4 min, then ready", span * 4 / 5, false},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := &Box{timing: defaultTimings(), ui: nopUI{}}
					tr := &failingBox{scriptedBox: scriptedBox{script: []string{answerOK}}, err: same, until: tc.until}
					start := time.Now()
					err := wait(t.Context(), b, tr)
					took := time.Since(start)
					t.Logf("%d calls, %v: %v", tr.n, took, err)
					if !tc.ends {
						if err != nil {
							t.Fatalf("not ready after %v: %v", took, err)
						}
						return
					}
					if err == nil || !strings.Contains(err.Error(), "failed the same way") || !strings.Contains(err.Error(), same.Error()) ||
						userr.Hint(err) == "" {
						t.Fatalf("got %v (next: %q); want the same failure's error and a next step", err, userr.Hint(err))
					}
					if took < sameFailureSpan || took > sameFailureSpan+time.Minute {
						t.Errorf("ended after %v; want %v", took, sameFailureSpan)
					}
				})
			})
		}
	}
}

// TestHeartbeatNamesTheLastTry: a wait's heartbeat line ends with the last
// try's failure (README: "the bound and the last try's failure"), on one
// line, its control characters made safe and cut at maxLastTry; a wait
// with no failure yet says nothing of one.
func TestHeartbeatNamesTheLastTry(t *testing.T) {
	ui := &recordingUI{}
	b := &Box{timing: defaultTimings(), ui: ui}
	b.timing.machineCheck = time.Hour
	w := waiting(b, "box", "the agent of box to report healthy")
	beat := func(last error) string {
		t.Helper()
		ui.lines = nil
		w.lastBeat = time.Now().Add(-b.timing.heartbeat)
		if err := w.beat(t.Context(), last); err != nil {
			t.Fatal(err)
		}
		return ui.text()
	}
	line := beat(errors.New("relaying health:\n  connection refused \x1b[2J"))
	if !strings.HasSuffix(line, "; the last try: relaying health: connection refused \\x1b[2J") || strings.Count(line, "\n") != 0 {
		t.Errorf("heartbeat: %q", line)
	}
	if line := beat(errors.New(strings.Repeat("x", 3*maxLastTry))); !strings.HasSuffix(line, "; the last try: "+strings.Repeat("x", maxLastTry)+"…") {
		t.Errorf("a long failure: %q", line)
	}
	if line := beat(nil); strings.Contains(line, "last try") || !strings.Contains(line, "waiting for the agent of box") {
		t.Errorf("no failure yet: %q", line)
	}
}
