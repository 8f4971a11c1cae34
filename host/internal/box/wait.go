package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// consoleFile is the guest console's log in a machine's data directory
// (smolvm: vm_data_dir(name)/agent-console.log).
const consoleFile = "agent-console.log"

// consoleTailLines is how much of the console a stopped machine's error
// shows.
const consoleTailLines = 15

// ErrMachineStopped is wrapped when a machine stopped while it was waited
// on; the error carries its console's tail and the next step.
var ErrMachineStopped = errors.New("the machine stopped")

// waiter is one bounded wait on a machine: every poll of it calls beat,
// which says every few seconds what is awaited, for how long and the
// bound, and checks every few seconds that the machine still runs, so a
// machine that stopped ends the wait at once, with its console's tail.
type waiter struct {
	b         *Box
	machine   string
	what      string
	start     time.Time
	lastBeat  time.Time
	lastCheck time.Time
}

// waiting starts a wait on machine for what ("SSH on 127.0.0.1:2222").
func waiting(b *Box, machine, what string) *waiter {
	now := time.Now()
	return &waiter{b: b, machine: machine, what: what, start: now, lastBeat: now, lastCheck: now}
}

// beat runs between two polls of the wait: a heartbeat line when one is
// due, and the machine check when one is due. It returns the error that
// ends the wait when the machine is no longer running, with last, the
// poll's last failure (nil for none). A nil waiter does nothing.
func (w *waiter) beat(ctx context.Context, last error) error {
	if w == nil {
		return nil
	}
	now := time.Now()
	if now.Sub(w.lastCheck) >= w.b.timing.machineCheck {
		w.lastCheck = now
		cctx, cancel := context.WithTimeout(ctx, w.b.timing.callTimeout)
		m, err := w.b.vm.Status(cctx, w.machine)
		cancel()
		if err == nil && m.State != smolvm.StateRunning {
			return w.stopped(ctx, m.State, last)
		}
	}
	if now.Sub(w.lastBeat) >= w.b.timing.heartbeat {
		w.lastBeat = now
		w.b.ui.Info("waiting for %s: %s so far, giving up after %s%s", w.what, progress.Duration(now.Sub(w.start)), w.bound(ctx), lastTry(last))
	}
	return nil
}

// maxLastTry bounds the last failure a heartbeat line quotes.
const maxLastTry = 200

// lastTry is the heartbeat's note of the last try's failure ("" for none):
// one line, at most maxLastTry characters.
func lastTry(err error) string {
	if err == nil {
		return ""
	}
	text := termsafe.String(strings.Join(strings.Fields(err.Error()), " "))
	if r := []rune(text); len(r) > maxLastTry {
		text = string(r[:maxLastTry]) + "…"
	}
	return "; the last try: " + text
}

// bound is what is left of the wait's deadline at its start, as said.
func (w *waiter) bound(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return progress.Duration(d.Sub(w.start).Round(time.Second))
	}
	return "Ctrl-C"
}

// stopped is the error of a wait whose machine is in state: what was
// awaited, for how long, and the tail of its console.
func (w *waiter) stopped(ctx context.Context, state string, last error) error {
	err := fmt.Errorf("%w: %s is %s after %s of waiting for %s", ErrMachineStopped, w.machine, state,
		progress.Duration(time.Since(w.start)), w.what)
	if last != nil {
		err = fmt.Errorf("%w (its last answer: %w)", err, last)
	}
	path, tail := consoleTail(ctx, w.b, w.machine)
	next := "hermes-box start tries again; hermes-box shell opens its root console"
	if tail != "" {
		err = fmt.Errorf("%w; the last lines of its console (%s):\n%s", err, path, tail)
		next = "the console above says why it stopped; " + next
	}
	return userr.WithHint(err, next)
}

// consoleTail is the path of machine's console log and its last lines,
// made safe for a terminal ("" when there is none).
func consoleTail(ctx context.Context, b *Box, machine string) (path, tail string) {
	cctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
	defer cancel()
	dir, err := b.vm.DataDir(cctx, machine)
	if err != nil {
		return "", ""
	}
	path = filepath.Join(dir, consoleFile)
	f, err := os.Open(path)
	if err != nil {
		return path, ""
	}
	defer f.Close()
	const window = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return path, ""
		}
	}
	b2, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return path, ""
	}
	lines := strings.Split(strings.TrimRight(string(b2), "\n"), "\n")
	if len(lines) > consoleTailLines {
		lines = lines[len(lines)-consoleTailLines:]
	}
	for i, l := range lines {
		lines[i] = "  | " + termsafe.String(l)
	}
	return path, strings.Join(lines, "\n")
}
