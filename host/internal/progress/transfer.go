package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// How often a transfer reports when it cannot redraw in place.
const (
	jsonInterval  = time.Second
	plainInterval = 10 * time.Second
)

// Transfer counts the bytes of one copy and reports them: a bar with
// bytes, rate and ETA on a terminal, progress events (at most one a
// second) under JSON, at most a line per ten seconds otherwise (a log must
// not fill with a copy's progress). It ends with a step event that carries
// the size. A size that is an estimate (the previous backup's) sizes the
// bar on a terminal only: a line or an event never gives it as this copy's
// size, nor an ETA computed from it.
type Transfer struct {
	r     *Renderer
	name  string
	total int64 // 0 when unknown
	// estimate says total is a guess (the previous backup's size).
	estimate bool
	// drawn says a bar shows the copy (set before the bar exists).
	drawn bool
	cur   atomic.Int64
	start time.Time

	mu       sync.Mutex // guards the fields below
	lastEmit time.Time
	bar      *mpb.Bar
	bars     *mpb.Progress
	ended    bool
}

// Transfer starts reporting a copy of total bytes (0: unknown) named name.
func (r *Renderer) Transfer(name string, total int64) *Transfer {
	return r.transfer(name, total, false)
}

func (r *Renderer) transfer(name string, total int64, estimate bool) *Transfer {
	t := &Transfer{r: r, name: name, total: total, estimate: estimate, start: r.now()}
	t.lastEmit = t.start
	msg := ""
	switch {
	case total > 0 && !estimate:
		msg = Bytes(total)
	case total > 0:
		msg = "the previous backup's was " + Bytes(total)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event(protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: name, State: protocol.StepStarted, Message: msg}, "")
	if r.mode == TTY && !r.quiet && r.bars == nil && hasWidth(r.w) {
		t.drawn = true
		t.bars = mpb.New(mpb.WithOutput(r.w), mpb.WithWidth(60), mpb.WithAutoRefresh(), mpb.WithRefreshRate(150*time.Millisecond))
		style := mpb.BarStyle().Lbound("[").Filler("#").Tip("#").Padding(".").Rbound("]")
		opts := []mpb.BarOption{mpb.BarRemoveOnComplete(), mpb.PrependDecorators(decor.Name("  ")),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return " " + t.line() }))}
		// Built with total 0 and given the total after, the bar completes
		// when Done says so, not when the count reaches an estimate.
		if total > 0 {
			t.bar = t.bars.New(0, style, opts...)
			t.bar.SetTotal(total, false)
		} else {
			t.bar = t.bars.New(0, mpb.SpinnerStyle(), opts...)
		}
		r.bars = t.bars
	}
	return t
}

// Write counts p.
func (t *Transfer) Write(p []byte) (int, error) {
	t.Add(int64(len(p)))
	return len(p), nil
}

// Add counts n more bytes.
func (t *Transfer) Add(n int64) {
	cur := t.cur.Add(n)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	if t.bar != nil {
		if t.total > 0 && cur > t.total {
			cur = t.total
		}
		t.bar.SetCurrent(cur)
		return
	}
	now := t.r.now()
	switch t.r.mode {
	case JSON:
		if now.Sub(t.lastEmit) < jsonInterval {
			return
		}
	case Plain, TTY:
		if now.Sub(t.lastEmit) < plainInterval {
			return
		}
	}
	t.lastEmit = now
	t.emit(cur)
}

// emit renders a progress event of the copy.
func (t *Transfer) emit(cur int64) {
	ev := protocol.Event{Type: protocol.EventProgress, Level: protocol.LevelInfo, Step: t.name,
		Progress: &protocol.Progress{Current: cur, Total: t.size(), Unit: "bytes"}, Fields: t.fields(cur)}
	if t.r.mode != JSON {
		ev.Progress = nil // the line says it
		ev.Type, ev.Message = protocol.EventLog, t.name+": "+t.line()
	}
	t.r.Event(ev)
}

func (t *Transfer) fields(cur int64) map[string]string {
	f := map[string]string{"bytes": fmt.Sprint(cur), "rate": fmt.Sprint(int64(t.rate(cur)))}
	if eta, ok := t.eta(cur); ok && !t.estimate {
		f["eta"] = Duration(eta)
	}
	return f
}

// size is the copy's size as far as it is known: 0 when the total is only
// an estimate, which sizes the bar but is never reported as this copy's.
func (t *Transfer) size() int64 {
	if t.estimate {
		return 0
	}
	return t.total
}

// rate is bytes per second since the start.
func (t *Transfer) rate(cur int64) float64 {
	d := t.r.now().Sub(t.start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(cur) / d
}

// etaWarmup is how long a copy runs before it shows an ETA: the first
// bytes (the box starting its side) say nothing about the rate to come.
const etaWarmup = time.Second

func (t *Transfer) eta(cur int64) (time.Duration, bool) {
	rate := t.rate(cur)
	if t.total <= 0 || rate <= 0 || cur > t.total || t.r.now().Sub(t.start) < etaWarmup {
		return 0, false
	}
	return time.Duration(float64(t.total-cur) / rate * float64(time.Second)), true
}

// line is "12.0 MiB / 1.2 GiB, 45.0 MiB/s, ETA 25s" (no total, no ETA when
// the size is unknown). Only the bar shows an estimate, as "/ ~SIZE" and
// the ETA it gives; a line in a log does not.
func (t *Transfer) line() string {
	cur := t.cur.Load()
	s := Bytes(cur)
	shown := t.total > 0 && (!t.estimate || t.drawn)
	if shown {
		s += " / " + map[bool]string{true: "~"}[t.estimate] + Bytes(t.total)
	}
	s += ", " + Bytes(int64(t.rate(cur))) + "/s"
	if eta, ok := t.eta(cur); ok && shown {
		s += ", ETA " + Duration(eta)
	}
	return s
}

// Done ends the copy: its step is done with the size and the mean rate,
// or failed with err.
func (t *Transfer) Done(err error) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	t.ended = true
	if t.bar != nil {
		if err != nil {
			t.bar.Abort(true)
		} else {
			t.bar.SetTotal(-1, true)
		}
		t.bars.Wait()
	}
	t.mu.Unlock()
	t.r.mu.Lock()
	if t.bars != nil && t.r.bars == t.bars {
		t.r.bars = nil
	}
	cur := t.cur.Load()
	ev := protocol.Event{Type: protocol.EventStep, Level: protocol.LevelInfo, Step: t.name, State: protocol.StepDone,
		Message: Bytes(cur) + ", " + Bytes(int64(t.rate(cur))) + "/s", Fields: t.fields(cur)}
	delete(ev.Fields, "eta")
	if err != nil {
		ev.State, ev.Level, ev.Message = protocol.StepFailed, protocol.LevelError, Bytes(cur)
		if t.r.mode == JSON {
			ev.Message = err.Error()
		}
	}
	t.r.event(ev, "")
	t.r.mu.Unlock()
}

// hasWidth reports whether w can draw a bar: a terminal that knows its
// width (a pseudo-terminal may say 0 columns), or not a terminal at all
// (tests render into buffers).
func hasWidth(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return true
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	return err == nil && cols > 0
}

// Track reports the bytes written through the returned writer to w as a
// transfer of the renderer ctx carries; done ends it. Without a renderer,
// w is returned as it is.
func Track(ctx context.Context, name string, total int64, w io.Writer) (io.Writer, func(error)) {
	r := FromContext(ctx)
	if r == nil {
		return w, func(error) {}
	}
	t := r.Transfer(name, total)
	return io.MultiWriter(w, t), t.Done
}

// TrackEstimate is Track with a guessed size (the ETA is a guess too, and
// the copy may run past it); 0 means unknown.
func TrackEstimate(ctx context.Context, name string, estimate int64, w io.Writer) (io.Writer, func(error)) {
	r := FromContext(ctx)
	if r == nil {
		return w, func(error) {}
	}
	t := r.transfer(name, estimate, estimate > 0)
	return io.MultiWriter(w, t), t.Done
}

// Bytes is n in binary units: "512 B", "1.5 KiB", "2.0 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Duration is d rounded for people: "850ms", "4.2s", "1m05s", "2h03m".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
