// Package progress renders what a host command is doing on stderr: its
// steps with their elapsed time, the agent's events, and data transfers
// (bytes, rate, ETA) — redrawn in place on a terminal (mpb), as JSON Lines
// events under --log-format json, and as plain lines otherwise.
package progress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// Mode is how a Renderer draws.
type Mode int

// The ways progress is rendered.
const (
	Plain Mode = iota // one line per event
	TTY               // a step list; progress redrawn in place
	JSON              // the events as JSON Lines
)

// Renderer renders the host's steps and the agent's events. It is safe for
// concurrent use.
type Renderer struct {
	mu      sync.Mutex
	w       io.Writer
	mode    Mode
	inline  bool           // TTY: a progress line is drawn and must be cleared
	lastPct map[string]int // plain: last printed decile per step
	starts  map[string]time.Time
	steps   int       // steps finished
	began   time.Time // the renderer's creation
	bars    *mpb.Progress
	now     func() time.Time
}

// New renders on w: JSON when format is "json", TTY when w is a terminal,
// plain lines otherwise.
func New(w io.Writer, format string) *Renderer {
	mode := Plain
	switch {
	case format == "json":
		mode = JSON
	case IsTerminal(w):
		mode = TTY
	}
	return NewMode(w, mode)
}

// NewMode renders on w in the given mode.
func NewMode(w io.Writer, mode Mode) *Renderer {
	return &Renderer{w: w, mode: mode, lastPct: map[string]int{}, starts: map[string]time.Time{},
		began: time.Now(), now: time.Now}
}

// Mode is the renderer's mode.
func (r *Renderer) Mode() Mode { return r.mode }

// IsTerminal reports whether w is a character device.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Event renders one event of the agent (or of the host). A step's end
// carries the time since its start.
func (r *Renderer) Event(ev protocol.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event(ev)
}

// maxSteps bounds the steps whose last printed decile is remembered.
const maxSteps = 256

func (r *Renderer) event(ev protocol.Event) {
	if ev.Time.IsZero() {
		ev.Time = r.now().UTC()
	}
	if ev.Type == protocol.EventStep {
		r.timeStep(&ev)
	}
	if r.mode != JSON {
		// Events come from the box: their text is shown, never obeyed.
		ev.Step, ev.Message = termsafe.String(ev.Step), termsafe.Text(ev.Message)
	}
	switch r.mode {
	case JSON:
		b, err := json.Marshal(ev)
		if err == nil {
			r.out().Write(append(termsafe.JSON(b), '\n'))
		}
	case TTY:
		r.tty(ev)
	default:
		r.plain(ev)
	}
}

// timeStep records a step's start and adds the elapsed time to its end.
func (r *Renderer) timeStep(ev *protocol.Event) {
	switch ev.State {
	case protocol.StepStarted:
		r.starts[ev.Step] = r.now()
	case protocol.StepDone, protocol.StepFailed, protocol.StepSkipped:
		start, ok := r.starts[ev.Step]
		if !ok {
			return
		}
		delete(r.starts, ev.Step)
		r.steps++
		if ev.Fields == nil {
			ev.Fields = map[string]string{}
		}
		if _, set := ev.Fields["elapsed"]; !set {
			ev.Fields["elapsed"] = Duration(r.now().Sub(start))
		}
	}
}

// out is where lines go: above the live transfer bar when there is one.
func (r *Renderer) out() io.Writer {
	if r.bars != nil {
		return r.bars
	}
	return r.w
}

func (r *Renderer) plain(ev protocol.Event) {
	w := r.out()
	switch ev.Type {
	case protocol.EventStep:
		fmt.Fprintf(w, "[%s] %s%s%s\n", ev.Step, ev.State, suffix(ev.Message), elapsed(ev))
	case protocol.EventProgress:
		pct := percent(ev.Progress)
		last, seen := r.lastPct[ev.Step]
		if pct < 0 || (seen && pct/10 == last) {
			return
		}
		if !seen && len(r.lastPct) >= maxSteps {
			clear(r.lastPct) // a box inventing step names must not grow this
		}
		r.lastPct[ev.Step] = pct / 10
		fmt.Fprintf(w, "[%s] %d%%%s\n", ev.Step, pct, suffix(ev.Message))
	default:
		fmt.Fprintf(w, "%s%s\n", levelPrefix(ev), ev.Message)
	}
}

var marks = map[protocol.StepState]string{protocol.StepStarted: "•", protocol.StepDone: "✓",
	protocol.StepSkipped: "–", protocol.StepFailed: "✗"}

func (r *Renderer) tty(ev protocol.Event) {
	w := r.out()
	if r.inline {
		fmt.Fprint(w, "\r\033[K")
		r.inline = false
	}
	switch ev.Type {
	case protocol.EventStep:
		fmt.Fprintf(w, "%s %s%s%s\n", marks[ev.State], ev.Step, suffix(ev.Message), elapsed(ev))
	case protocol.EventProgress:
		bar := ""
		if pct := percent(ev.Progress); pct >= 0 {
			n := pct / 5
			bar = fmt.Sprintf(" [%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", 20-n), pct)
		}
		fmt.Fprintf(w, "  %s%s%s", ev.Step, bar, suffix(ev.Message))
		r.inline = r.bars == nil
		if !r.inline {
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "%s%s\n", levelPrefix(ev), ev.Message)
	}
}

func elapsed(ev protocol.Event) string {
	if e := ev.Fields["elapsed"]; e != "" {
		return " (" + e + ")"
	}
	return ""
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func levelPrefix(ev protocol.Event) string {
	switch {
	case ev.Type == protocol.EventWarning || ev.Level == protocol.LevelWarn:
		return "warning: "
	case ev.Level == protocol.LevelError:
		return "error: "
	}
	return ""
}

// percent is the progress in percent, or -1 when the total is unknown.
func percent(pr *protocol.Progress) int {
	if pr == nil || pr.Total <= 0 {
		return -1
	}
	return int(min(100, pr.Current*100/pr.Total))
}

// Info renders a host message.
func (r *Renderer) Info(format string, args ...any) {
	r.Event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Message: fmt.Sprintf(format, args...)})
}

// Warn renders a host warning.
func (r *Renderer) Warn(format string, args ...any) {
	r.Event(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn, Message: fmt.Sprintf(format, args...)})
}

// Step renders the start of a host step and returns the function that
// renders its end with its elapsed time: done when err is nil, failed
// otherwise (the error itself is the command's to print, except in JSON).
func (r *Renderer) Step(name, msg string) func(err error) {
	r.Event(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepStarted, Message: msg})
	return func(err error) {
		ev := protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepDone}
		if err != nil {
			// In text the command's final error says why, once; an event
			// carries it.
			ev.State, ev.Level = protocol.StepFailed, protocol.LevelError
			if r.mode == JSON {
				ev.Message = err.Error()
			}
		}
		r.Event(ev)
	}
}

// Summary renders the end of a command: how many steps it took and its
// total time, e.g. "init: 9 steps in 1m02s".
func (r *Renderer) Summary(command string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := Duration(r.now().Sub(r.began))
	r.event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Step: command,
		Message: fmt.Sprintf("%s: %d steps in %s", command, r.steps, total),
		Fields:  map[string]string{"steps": fmt.Sprint(r.steps), "elapsed": total}})
}

// Error renders the final error of a command as an event (JSON mode only;
// text mode prints it once, plainly, in the command line's own words). It
// reports whether it rendered anything.
func (r *Renderer) Error(err error, hint string) bool {
	if r.mode != JSON {
		return false
	}
	ev := protocol.Event{Type: protocol.EventLog, Level: protocol.LevelError, Message: err.Error()}
	if hint != "" {
		ev.Fields = map[string]string{"hint": hint}
	}
	r.Event(ev)
	return true
}

type ctxKey struct{}

// NewContext returns ctx carrying r, for the packages below the command
// line (backup) that report transfers.
func NewContext(ctx context.Context, r *Renderer) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext is the renderer ctx carries, or nil.
func FromContext(ctx context.Context) *Renderer {
	r, _ := ctx.Value(ctxKey{}).(*Renderer)
	return r
}
