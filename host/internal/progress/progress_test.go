package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// clock is a fake time source advanced by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newFake(mode Mode) (*Renderer, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r := NewMode(&buf, mode)
	r.now, r.began = c.now, c.t
	return r, &buf, c
}

func TestStepElapsedAndSummary(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		want []string
	}{
		{Plain, []string{"[build] started: image\n", "[build] done (2.5s)\n", "[boot] failed (1m05s)\n", "init: 2 steps in 1m08s\n"}},
		{TTY, []string{"• build: image\n", "✓ build (2.5s)\n", "✗ boot (1m05s)\n", "init: 2 steps in 1m08s\n"}},
	} {
		r, buf, c := newFake(tc.mode)
		end := r.Step("build", "image")
		c.advance(2500 * time.Millisecond)
		end(nil)
		end = r.Step("boot", "")
		c.advance(65 * time.Second)
		end(errors.New("no network"))
		c.advance(500 * time.Millisecond)
		r.Summary("init")
		got := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("mode %d: output lacks %q:\n%s", tc.mode, w, got)
			}
		}
	}
}

// planRun is a command with a plan of three steps: a, the agent's x inside
// it, an unplanned u, then c (b, planned, does not run), ended after c
// when full, after a otherwise.
func planRun(r *Renderer, c *clock, full bool) {
	r.Plan([]string{"a", "b", "c"})
	end := r.Step("a", "first")
	r.Event(protocol.Event{Type: protocol.EventStep, Step: "x", State: protocol.StepStarted})
	r.Event(protocol.Event{Type: protocol.EventStep, Step: "x", State: protocol.StepDone})
	c.advance(time.Second)
	end(nil)
	if full {
		r.Step("u", "")(nil)
		end = r.Step("c", "")
		c.advance(2 * time.Second)
		end(nil)
	}
	r.Summary("init")
}

func TestPlanNumbersSteps(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		full bool
		want []string
	}{
		{TTY, true, []string{"• [1/3] a: first\n", "  • x\n", "  ✓ x (0s)\n", "✓ [1/3] a (1.0s)\n", "• u\n", "✓ [3/3] c (2.0s)\n", "init: 2 of 3 steps in 3.0s\n"}},
		{Plain, true, []string{"1/3 [a] started: first\n", "[x] started\n", "1/3 [a] done (1.0s)\n", "[u] done", "3/3 [c] done (2.0s)\n", "init: 2 of 3 steps in 3.0s\n"}},
		{Plain, false, []string{"1/3 [a] done (1.0s)\n", "init: 1 of 3 steps in 1.0s\n"}},
	} {
		r, buf, c := newFake(tc.mode)
		planRun(r, c, tc.full)
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("mode %d: output lacks %q:\n%s", tc.mode, w, buf.String())
			}
		}
	}
	// Every planned step done: M of M, and the summary counts M.
	r, buf, _ := newFake(TTY)
	r.Plan([]string{"a", "c"})
	r.Step("a", "")(nil)
	r.Step("c", "")(nil)
	r.Summary("init")
	if !strings.Contains(buf.String(), "✓ [2/2] c (0s)\ninit: 2 steps in 0s\n") {
		t.Errorf("a whole plan:\n%s", buf.String())
	}
	r, buf, c := newFake(JSON)
	planRun(r, c, true)
	var got []string
	evs := decode(t, buf)
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s %s %s/%s", ev.Step, ev.State, ev.Fields["n"], ev.Fields["of"]))
	}
	want := []string{"a started 1/3", "x started /", "x done /", "a done 1/3", "u started /", "u done /", "c started 3/3", "c done 3/3", "init  /3"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("JSON steps:\n got %q\nwant %q", got, want)
	}
	if last := evs[len(evs)-1]; last.Fields["steps"] != "2" || last.Message != "init: 2 of 3 steps in 3.0s" {
		t.Errorf("summary %+v", last)
	}
}

func TestJSONStepsCarryElapsed(t *testing.T) {
	r, buf, c := newFake(JSON)
	end := r.Step("pull", "")
	c.advance(3 * time.Second)
	end(nil)
	r.Summary("init")
	evs := decode(t, buf)
	if len(evs) != 3 || evs[1].Fields["elapsed"] != "3.0s" || evs[2].Fields["steps"] != "1" {
		t.Fatalf("events: %+v", evs)
	}
}

func TestAgentStepsAreTimedToo(t *testing.T) {
	r, buf, c := newFake(Plain)
	r.Event(protocol.Event{Type: protocol.EventStep, Step: "apt", State: protocol.StepStarted})
	c.advance(1500 * time.Millisecond)
	r.Event(protocol.Event{Type: protocol.EventStep, Step: "apt", State: protocol.StepDone})
	if !strings.Contains(buf.String(), "[apt] done (1.5s)") {
		t.Fatalf("got %q", buf.String())
	}
}

func TestTransferJSON(t *testing.T) {
	r, buf, c := newFake(JSON)
	ctx := NewContext(context.Background(), r)
	var sink bytes.Buffer
	w, done := Track(ctx, "rootfs", 4<<20, &sink)
	for range 4 {
		c.advance(time.Second)
		if _, err := w.Write(make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	done(nil)
	if sink.Len() != 4<<20 {
		t.Fatalf("sink got %d bytes", sink.Len())
	}
	evs := decode(t, buf)
	var progress []protocol.Event
	for _, ev := range evs {
		if ev.Type == protocol.EventProgress {
			progress = append(progress, ev)
		}
	}
	if len(progress) != 4 {
		t.Fatalf("want 4 progress events (one a second), got %d: %+v", len(progress), evs)
	}
	first := progress[0]
	if first.Progress.Current != 1<<20 || first.Progress.Total != 4<<20 || first.Fields["rate"] != "1048576" || first.Fields["eta"] != "3.0s" {
		t.Errorf("first progress event: %+v %+v", first.Progress, first.Fields)
	}
	last := evs[len(evs)-1]
	if last.State != protocol.StepDone || last.Fields["bytes"] != "4194304" || last.Fields["elapsed"] != "4.0s" || last.Message != "4.0 MiB, 1.0 MiB/s" {
		t.Errorf("last event: %+v", last)
	}
}

func TestTransferJSONThrottles(t *testing.T) {
	r, buf, _ := newFake(JSON)
	tr := r.Transfer("workspace", 0)
	for range 1000 {
		tr.Add(10)
	}
	tr.Done(nil)
	if n := strings.Count(buf.String(), `"type":"progress"`); n > 1 {
		t.Fatalf("%d progress events within a second", n)
	}
	if !strings.Contains(buf.String(), `"bytes":"10000"`) {
		t.Fatalf("the end lacks the size: %s", buf)
	}
}

// TestTransferPlainThrottles: off a terminal a copy prints at most a line
// per ten seconds, and its end.
func TestTransferPlainThrottles(t *testing.T) {
	r, buf, c := newFake(Plain)
	tr := r.Transfer("package", 3000)
	for range 3000 {
		c.advance(10 * time.Millisecond)
		tr.Add(1)
	}
	tr.Done(nil)
	out := buf.String()
	if n := strings.Count(out, "package: "); n != 3 {
		t.Errorf("want a line per ten seconds of a 30 s copy (3), got %d:\n%s", n, out)
	}
	if !strings.Contains(out, "package: 1000 B / 2.9 KiB, 100 B/s, ETA 20.0s\n") || !strings.Contains(out, "[package] done: 2.9 KiB, 100 B/s (30.0s)") {
		t.Errorf("output:\n%s", out)
	}
}

func TestTransferTTYDrawsBar(t *testing.T) {
	var buf syncBuffer
	r := NewMode(&buf, TTY)
	tr := r.Transfer("rootfs", 3<<20)
	tr.Add(1 << 20)
	r.Info("a line while the bar is live")
	tr.Add(2 << 20)
	tr.Done(nil)
	out := buf.String()
	for _, w := range []string{"• rootfs: 3.0 MiB", "[#", "a line while the bar is live", "✓ rootfs: 3.0 MiB, "} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%q", w, out)
		}
	}
}

func TestTransferFailure(t *testing.T) {
	r, buf, _ := newFake(Plain)
	_, done := Track(NewContext(context.Background(), r), "restore", 10, io.Discard)
	done(errors.New("disk full"))
	if !strings.Contains(buf.String(), "[restore] failed: 0 B") {
		t.Fatalf("got %q", buf.String())
	}
}

func TestTrackWithoutRenderer(t *testing.T) {
	var sink bytes.Buffer
	w, done := Track(context.Background(), "x", 0, &sink)
	if w != io.Writer(&sink) {
		t.Fatal("without a renderer the writer must be returned as it is")
	}
	done(nil)
}

func TestErrorEvent(t *testing.T) {
	r, buf, _ := newFake(JSON)
	if !r.Error(errors.New("boom"), "run hermes-box init first") {
		t.Fatal("JSON mode must render the error")
	}
	evs := decode(t, buf)
	if len(evs) != 1 || evs[0].Level != protocol.LevelError || evs[0].Fields["hint"] != "run hermes-box init first" {
		t.Fatalf("events: %+v", evs)
	}
	if p, _, _ := newFake(Plain); p.Error(errors.New("x"), "") {
		t.Fatal("text mode leaves the error to the command line")
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Bytes(0), "0 B"}, {Bytes(1023), "1023 B"}, {Bytes(1536), "1.5 KiB"}, {Bytes(5 << 30), "5.0 GiB"},
		{Duration(850 * time.Millisecond), "850ms"}, {Duration(4200 * time.Millisecond), "4.2s"},
		{Duration(65 * time.Second), "1m05s"}, {Duration(2*time.Hour + 3*time.Minute), "2h03m"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func decode(t *testing.T, buf *bytes.Buffer) []protocol.Event {
	t.Helper()
	var evs []protocol.Event
	dec := json.NewDecoder(buf)
	for dec.More() {
		var ev protocol.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestSlogHandler(t *testing.T) {
	r, buf, _ := newFake(Plain)
	log := slog.New(NewHandler(r, slog.LevelInfo))
	log.Debug("hidden")
	log.Warn("removing the staged copy", "error", "busy")
	log.With("machine", "hermes-box").Info("started")
	if got, want := buf.String(), "warning: removing the staged copy (error: busy)\nstarted (machine: hermes-box)\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	j, jbuf, _ := newFake(JSON)
	slog.New(NewHandler(j, slog.LevelInfo)).WithGroup("g").Error("boom", "k", 1)
	evs := decode(t, jbuf)
	if len(evs) != 1 || evs[0].Level != protocol.LevelError || evs[0].Fields["g.k"] != "1" {
		t.Fatalf("events %+v", evs)
	}
}

// TestTransferEstimate: the previous backup's size is never given as this
// copy's, off a terminal or under JSON: a 300-byte copy after a 100-byte
// one prints no "~100 B" total and no ETA from it.
func TestTransferEstimate(t *testing.T) {
	r, buf, c := newFake(Plain)
	w, done := TrackEstimate(NewContext(context.Background(), r), "snapshot rootfs", 100, io.Discard)
	for range 30 {
		c.advance(time.Second)
		if _, err := w.Write(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
	}
	done(nil)
	out := buf.String()
	for _, want := range []string{"[snapshot rootfs] started: the previous backup's was 100 B", "snapshot rootfs: 100 B, 10 B/s\n", "done: 300 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "~") || strings.Contains(out, "ETA") || strings.Count(out, "snapshot rootfs: ") != 3 {
		t.Errorf("the estimate was given as this copy's size, or the lines are not throttled:\n%s", out)
	}
	r, buf, c = newFake(JSON)
	w, done = TrackEstimate(NewContext(context.Background(), r), "snapshot rootfs", 100, io.Discard)
	c.advance(2 * time.Second)
	if _, err := w.Write(make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	done(nil)
	for _, ev := range decode(t, buf) {
		if ev.Progress != nil && ev.Progress.Total != 0 || ev.Fields["eta"] != "" {
			t.Errorf("a JSON event gives the estimate as the size: %+v %+v", ev.Progress, ev.Fields)
		}
	}
}

// TestQuietRendersOnlyWarningsAndErrors: a quiet renderer drops steps,
// transfers, progress and information lines in every mode, and keeps
// warnings, a failed step and the agent's error lines.
func TestQuietRendersOnlyWarningsAndErrors(t *testing.T) {
	for _, mode := range []Mode{Plain, TTY, JSON} {
		r, buf, _ := newFake(mode)
		r.SetQuiet(true)
		r.Step("build", "image")(nil)
		r.Info("snapshot rootfs: read %d B", 10)
		tr := r.Transfer("stage rootfs.tar.gz", 100)
		tr.Add(50)
		tr.Done(nil)
		r.Event(protocol.Event{Type: protocol.EventProgress, Level: protocol.LevelInfo, Step: "pull", Message: "still running"})
		r.Event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelDebug, Message: "debug line"})
		r.Summary("init")
		if buf.Len() != 0 {
			t.Fatalf("mode %d: quiet rendered %q", mode, buf.String())
		}
		r.Warn("the box is not qualified")
		r.Step("boot", "")(errors.New("no kvm"))
		r.Event(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelError, Message: "agent failed"})
		out := buf.String()
		for _, want := range []string{"the box is not qualified", "boot", "agent failed"} {
			if !strings.Contains(out, want) {
				t.Errorf("mode %d: quiet dropped %q:\n%s", mode, want, out)
			}
		}
		r.SetQuiet(false)
		r.Info("loud again")
		if !strings.Contains(buf.String(), "loud again") {
			t.Errorf("mode %d: SetQuiet(false) still drops information lines", mode)
		}
	}
}
