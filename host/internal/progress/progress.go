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
	"maps"
	"os"
	"slices"
	"strconv"
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
	plan    []string  // the host steps to number, in order (Plan)
	cursor  int       // the plan's entries before it are passed
	planned int       // numbered steps done
	open    int       // numbered steps started and not ended
	bars    *mpb.Progress
	now     func() time.Time
	quiet   bool // only warnings and errors are rendered (SetQuiet)
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

// SetQuiet renders only warnings and errors from now on: no steps,
// progress, transfers or information lines (--quiet). The command's data
// on stdout is not the renderer's and is unchanged.
func (r *Renderer) SetQuiet(quiet bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quiet = quiet
}

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
	r.event(ev, "")
}

// maxSteps bounds the steps whose last printed decile is remembered.
const maxSteps = 256

// event renders ev; num is a host step's place in the plan ("3/15"), ""
// for every other event.
func (r *Renderer) event(ev protocol.Event, num string) {
	if ev.Time.IsZero() {
		ev.Time = r.now().UTC()
	}
	if ev.Type == protocol.EventStep {
		r.timeStep(&ev)
	}
	nested := num == "" && r.open > 0
	if num != "" {
		r.countPlanned(ev.State)
	}
	if r.quiet && ev.Type != protocol.EventWarning && !ev.Level.Enabled(protocol.LevelWarn) {
		return
	}
	if r.mode != JSON {
		// Events come from the box: their text is shown, never obeyed.
		ev.Step, ev.Message = termsafe.String(ev.Step), termsafe.Text(ev.Message)
		ev.State = protocol.StepState(termsafe.String(string(ev.State)))
	}
	switch r.mode {
	case JSON:
		b, err := json.Marshal(ev)
		if err == nil {
			r.out().Write(append(termsafe.JSON(b), '\n'))
		}
	case TTY:
		r.tty(ev, num, nested)
	default:
		r.plain(ev, num)
	}
}

// countPlanned follows the numbered steps: how many are open and done.
func (r *Renderer) countPlanned(state protocol.StepState) {
	switch state {
	case protocol.StepStarted:
		r.open++
	case protocol.StepDone:
		r.planned++
		fallthrough
	default:
		r.open = max(0, r.open-1)
	}
}

// timeStep records a step's start and adds the elapsed time to its end.
func (r *Renderer) timeStep(ev *protocol.Event) {
	switch ev.State {
	case protocol.StepStarted:
		if _, seen := r.starts[ev.Step]; !seen && len(r.starts) >= maxSteps {
			clear(r.starts) // steps that never ended: a box inventing names must not grow this
		}
		r.starts[ev.Step] = r.now()
	case protocol.StepDone, protocol.StepFailed, protocol.StepSkipped:
		start, ok := r.starts[ev.Step]
		if !ok {
			return
		}
		delete(r.starts, ev.Step)
		r.steps++
		// The host times its steps: an elapsed the event carried is
		// replaced.
		ev.Fields = maps.Clone(ev.Fields)
		if ev.Fields == nil {
			ev.Fields = map[string]string{}
		}
		ev.Fields["elapsed"] = Duration(r.now().Sub(start))
	}
}

// out is where lines go: above the live transfer bar when there is one.
func (r *Renderer) out() io.Writer {
	if r.bars != nil {
		return r.bars
	}
	return r.w
}

func (r *Renderer) plain(ev protocol.Event, num string) {
	w := r.out()
	switch ev.Type {
	case protocol.EventStep:
		if num != "" {
			num += " "
		}
		fmt.Fprintf(w, "%s[%s] %s%s%s\n", num, ev.Step, ev.State, suffix(ev.Message), elapsed(ev))
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

// tty draws ev on a terminal: a numbered step as "✓ [3/15] name (time)",
// the events inside one (the agent's steps) indented below it.
func (r *Renderer) tty(ev protocol.Event, num string, nested bool) {
	w := r.out()
	if r.inline {
		fmt.Fprint(w, "\r\033[K")
		r.inline = false
	}
	indent := ""
	if nested {
		indent = "  "
	}
	if num != "" {
		num = "[" + num + "] "
	}
	switch ev.Type {
	case protocol.EventStep:
		fmt.Fprintf(w, "%s%s %s%s%s%s\n", indent, marks[ev.State], num, ev.Step, suffix(ev.Message), elapsed(ev))
	case protocol.EventProgress:
		bar := ""
		if pct := percent(ev.Progress); pct >= 0 {
			n := pct / 5
			bar = fmt.Sprintf(" [%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", 20-n), pct)
		}
		fmt.Fprintf(w, "%s  %s%s%s", indent, ev.Step, bar, suffix(ev.Message))
		r.inline = r.bars == nil
		if !r.inline {
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "%s%s%s\n", indent, levelPrefix(ev), ev.Message)
	}
}

func elapsed(ev protocol.Event) string {
	if e := ev.Fields["elapsed"]; e != "" {
		return " (" + termsafe.String(e) + ")"
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
//
// A step the plan names (Plan) is numbered "N/M": in text before its name,
// in JSON as fields n and of.
func (r *Renderer) Step(name, msg string) func(err error) {
	r.mu.Lock()
	n := r.number(name)
	r.event(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepStarted, Message: msg,
		Fields: r.numbered(n)}, r.label(n))
	r.mu.Unlock()
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
		r.mu.Lock()
		defer r.mu.Unlock()
		ev.Fields = r.numbered(n)
		r.event(ev, r.label(n))
	}
}

// Plan numbers the host steps that follow: M is len(steps), and a Step
// named as the plan's next entry (or a later one: a step the plan lists
// may not run) is step N of M. A step the plan does not list is shown
// without a number. Summary then counts the numbered steps.
func (r *Renderer) Plan(steps []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plan, r.cursor, r.planned = slices.Clone(steps), 0, 0
}

// number is name's place in the plan from the cursor on (1-based), or 0.
func (r *Renderer) number(name string) int {
	for i := r.cursor; i < len(r.plan); i++ {
		if r.plan[i] == name {
			r.cursor = i + 1
			return i + 1
		}
	}
	return 0
}

// numbered is the fields of step n of the plan (nil when n is 0).
func (r *Renderer) numbered(n int) map[string]string {
	if n == 0 {
		return nil
	}
	return map[string]string{"n": strconv.Itoa(n), "of": strconv.Itoa(len(r.plan))}
}

// label is "N/M" of step n of the plan, "" when n is 0.
func (r *Renderer) label(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", n, len(r.plan))
}

// Summary renders the end of a command: how many steps it took and its
// total time, e.g. "init: 9 steps in 1m02s". With a plan it counts the
// plan's steps done: "init: 15 steps in 1m02s" when all were, "init: 7 of
// 15 steps in 20s" when it stopped short.
func (r *Renderer) Summary(command string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := Duration(r.now().Sub(r.began))
	steps, count := r.steps, fmt.Sprint(r.steps)
	fields := map[string]string{"elapsed": total}
	if len(r.plan) > 0 {
		steps, count = r.planned, fmt.Sprint(r.planned)
		if r.planned != len(r.plan) {
			count = fmt.Sprintf("%d of %d", r.planned, len(r.plan))
		}
		fields["of"] = strconv.Itoa(len(r.plan))
	}
	fields["steps"] = strconv.Itoa(steps)
	r.event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Step: command,
		Message: fmt.Sprintf("%s: %s steps in %s", command, count, total), Fields: fields}, "")
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
