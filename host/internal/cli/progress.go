package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// The ways progress is rendered on stderr.
const (
	renderPlain = iota // one line per event
	renderTTY          // a step list with the current progress redrawn in place
	renderJSON         // the events as JSON Lines (--log-format json)
)

// maxSteps bounds the steps whose last printed decile is remembered.
const maxSteps = 256

// progress renders the host's steps and the agent's events. It is safe
// for concurrent use.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	mode    int
	inline  bool           // a progress line is drawn and must be cleared
	lastPct map[string]int // plain mode: last printed decile per step
}

func newProgress(w io.Writer, format string) *progress {
	p := &progress{w: w, mode: renderPlain, lastPct: map[string]int{}}
	switch {
	case format == "json":
		p.mode = renderJSON
	case isTerminal(w):
		p.mode = renderTTY
	}
	return p
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Event renders one event of the agent (or of the host).
func (p *progress) Event(ev protocol.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if p.mode != renderJSON {
		// Events come from the box: their text is shown, never obeyed.
		ev.Step, ev.Message = termsafe.String(ev.Step), termsafe.Text(ev.Message)
	}
	switch p.mode {
	case renderJSON:
		b, err := json.Marshal(ev)
		if err == nil {
			p.w.Write(append(termsafe.JSON(b), '\n'))
		}
	case renderTTY:
		p.tty(ev)
	default:
		p.plain(ev)
	}
}

func (p *progress) plain(ev protocol.Event) {
	switch ev.Type {
	case protocol.EventStep:
		fmt.Fprintf(p.w, "[%s] %s%s\n", ev.Step, ev.State, suffix(ev.Message))
	case protocol.EventProgress:
		pct := percent(ev.Progress)
		last, seen := p.lastPct[ev.Step]
		if pct < 0 || (seen && pct/10 == last) {
			return
		}
		if !seen && len(p.lastPct) >= maxSteps {
			clear(p.lastPct) // a box inventing step names must not grow this
		}
		p.lastPct[ev.Step] = pct / 10
		fmt.Fprintf(p.w, "[%s] %d%%%s\n", ev.Step, pct, suffix(ev.Message))
	default:
		fmt.Fprintf(p.w, "%s%s\n", levelPrefix(ev), ev.Message)
	}
}

func (p *progress) tty(ev protocol.Event) {
	if p.inline {
		fmt.Fprint(p.w, "\r\033[K")
		p.inline = false
	}
	switch ev.Type {
	case protocol.EventStep:
		mark := map[protocol.StepState]string{protocol.StepStarted: "•", protocol.StepDone: "✓",
			protocol.StepSkipped: "–", protocol.StepFailed: "✗"}[ev.State]
		fmt.Fprintf(p.w, "%s %s%s\n", mark, ev.Step, suffix(ev.Message))
	case protocol.EventProgress:
		bar := ""
		if pct := percent(ev.Progress); pct >= 0 {
			n := pct / 5
			bar = fmt.Sprintf(" [%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", 20-n), pct)
		}
		fmt.Fprintf(p.w, "  %s%s%s", ev.Step, bar, suffix(ev.Message))
		p.inline = true
	default:
		fmt.Fprintf(p.w, "%s%s\n", levelPrefix(ev), ev.Message)
	}
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
func (p *progress) Info(format string, args ...any) {
	p.Event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Message: fmt.Sprintf(format, args...)})
}

// Warn renders a host warning.
func (p *progress) Warn(format string, args ...any) {
	p.Event(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn, Message: fmt.Sprintf(format, args...)})
}

// Step renders the start of a host step and returns the function that
// renders its end: done when err is nil, failed otherwise.
func (p *progress) Step(name, msg string) func(err error) {
	p.Event(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepStarted, Message: msg})
	return func(err error) {
		ev := protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepDone}
		if err != nil {
			ev.State, ev.Level, ev.Message = protocol.StepFailed, protocol.LevelError, err.Error()
		}
		p.Event(ev)
	}
}
