package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// recordingOps records every call as "op name [port|dir]" and fails the
// calls named in fail. A call made on an already cancelled context is
// recorded with a "!cancelled" suffix.
type recordingOps struct {
	machines map[string]bool // exists
	running  map[string]bool
	fail     map[string]error
	calls    []string
	// onCall runs before a call is recorded (to cancel the caller).
	onCall func(call string)
}

func newOps(existing ...string) *recordingOps {
	o := &recordingOps{machines: map[string]bool{}, running: map[string]bool{}, fail: map[string]error{}}
	for _, m := range existing {
		o.machines[m], o.running[m] = true, true
	}
	return o
}

// restoreNameOf hides the pid and time in candidate names.
func restoreNameOf(name string) string {
	if i := strings.Index(name, candidateMark); i >= 0 {
		return name[:i] + candidateMark + "N"
	}
	return name
}

func (o *recordingOps) call(ctx context.Context, op, name string, extra ...any) error {
	c := strings.TrimSpace(op + " " + restoreNameOf(name) + " " + strings.TrimSpace(fmt.Sprint(extra...)))
	if o.onCall != nil {
		o.onCall(c)
	}
	if ctx.Err() != nil {
		c += " !cancelled"
	}
	o.calls = append(o.calls, c)
	for k, err := range o.fail {
		if c == k || strings.HasPrefix(c, k+" ") {
			return err
		}
	}
	return nil
}

func (o *recordingOps) Exists(ctx context.Context, name string) (bool, error) {
	return o.machines[name], o.call(ctx, "exists", name)
}

func (o *recordingOps) Running(ctx context.Context, name string) (bool, error) {
	return o.running[name], o.call(ctx, "running", name)
}

func (o *recordingOps) List(ctx context.Context) ([]string, error) {
	var out []string
	for m := range o.machines {
		out = append(out, m)
	}
	return out, o.call(ctx, "list", "")
}

func (o *recordingOps) FreePort(ctx context.Context) (int, error) {
	return 4444, o.call(ctx, "port", "")
}

func (o *recordingOps) SafetySnapshot(ctx context.Context, name string) (string, error) {
	o.running[name] = false
	return "/b/safety", o.call(ctx, "safety-snapshot", name)
}

func (o *recordingOps) CreateRestore(ctx context.Context, name string, port int) error {
	if err := o.call(ctx, "create", name, port); err != nil {
		return err
	}
	o.machines[name] = true
	return nil
}

func (o *recordingOps) Apply(ctx context.Context, name string, port int, dir string) error {
	if err := o.call(ctx, "apply", name, dir); err != nil {
		return err
	}
	o.running[name] = true
	return nil
}

func (o *recordingOps) Health(ctx context.Context, name string, _ int) error {
	return o.call(ctx, "health", name)
}

func (o *recordingOps) Start(ctx context.Context, name string, _ int) error {
	o.running[name] = true
	return o.call(ctx, "start", name)
}

func (o *recordingOps) Stop(ctx context.Context, name string) error {
	o.running[name] = false
	return o.call(ctx, "stop", name)
}

func (o *recordingOps) Delete(ctx context.Context, name string) error {
	if err := o.call(ctx, "delete", name); err != nil {
		return err
	}
	delete(o.machines, name)
	return nil
}

func runRestore(t *testing.T, ctx context.Context, o *recordingOps) error {
	t.Helper()
	r := &Restore{Ops: o, Machine: "box", Port: 2222, StateDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return r.Run(ctx, "/b/new")
}

func wantCalls(t *testing.T, o *recordingOps, want ...string) {
	t.Helper()
	if !slices.Equal(o.calls, want) {
		t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(o.calls, "\n  "), strings.Join(want, "\n  "))
	}
}

var errBoom = errors.New("boom")

func TestRestoreFreshSuccess(t *testing.T) {
	o := newOps()
	if err := runRestore(t, t.Context(), o); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, o, "exists box", "create box 2222", "apply box /b/new", "health box")
}

func TestRestoreFreshFailureDeletesOnlyWhatItCreated(t *testing.T) {
	tests := []struct {
		name string
		fail string
		want []string
	}{
		{"create fails", "create box", []string{"exists box", "create box 2222"}},
		{"apply fails", "apply box", []string{"exists box", "create box 2222", "apply box /b/new", "stop box", "delete box"}},
		{"health fails", "health box", []string{"exists box", "create box 2222", "apply box /b/new", "health box", "stop box", "delete box"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOps("other")
			o.fail[tt.fail] = errBoom
			err := runRestore(t, t.Context(), o)
			if !errors.Is(err, errBoom) {
				t.Fatalf("err %v", err)
			}
			wantCalls(t, o, tt.want...)
			if !o.machines["other"] || o.machines["box"] {
				t.Errorf("machines after: %v", o.machines)
			}
		})
	}
}

func TestRestoreReplacementSuccessOrder(t *testing.T) {
	o := newOps("box")
	if err := runRestore(t, t.Context(), o); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, o,
		"exists box", "running box", "port",
		"safety-snapshot box",
		"create box-restore-N 4444", "apply box-restore-N /b/new", "health box-restore-N", "stop box-restore-N", "delete box-restore-N",
		"delete box", "create box 2222", "apply box /b/new", "health box")
}

func TestRestoreCandidateFailureRestartsOriginal(t *testing.T) {
	for _, step := range []string{"create box-restore-N", "apply box-restore-N", "health box-restore-N"} {
		t.Run(step, func(t *testing.T) {
			o := newOps("box")
			o.fail[step] = errBoom
			if err := runRestore(t, t.Context(), o); !errors.Is(err, errBoom) {
				t.Fatalf("err %v", err)
			}
			last := o.calls[len(o.calls)-1]
			if last != "start box" {
				t.Errorf("last call %q, want start box", last)
			}
			if slices.Contains(o.calls, "delete box") {
				t.Errorf("the original was deleted: %v", o.calls)
			}
			created := slices.ContainsFunc(o.calls, func(c string) bool { return strings.HasPrefix(c, "create box-restore-N") }) && step != "create box-restore-N"
			if created != slices.Contains(o.calls, "delete box-restore-N") {
				t.Errorf("candidate cleanup wrong: %v", o.calls)
			}
		})
	}
}

func TestRestoreCutOverFailureRollsBackFromSafetySnapshot(t *testing.T) {
	o := newOps("box")
	applies := 0
	o.onCall = func(c string) {
		if c == "apply box /b/new" {
			applies++
			o.fail["apply box /b/new"] = errBoom
		}
	}
	err := runRestore(t, t.Context(), o)
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "recreated from /b/safety") {
		t.Fatalf("err %v", err)
	}
	tail := o.calls[slices.Index(o.calls, "delete box"):]
	want := []string{"delete box", "create box 2222", "apply box /b/new", "stop box", "delete box", "create box 2222", "apply box /b/safety"}
	if !slices.Equal(tail, want) {
		t.Errorf("cut-over calls %v, want %v", tail, want)
	}
}

// TestRestoreCancellation: Ctrl-C during the candidate still removes the
// candidate and restarts the original (short steps, on fresh contexts);
// during the cut-over the restore stops at once, leaving the journal that
// names the safety snapshot instead of a long rollback.
func TestRestoreCancellation(t *testing.T) {
	tests := []struct {
		name, cancelAt, wantLast string
		interrupted              bool
	}{
		{"during candidate", "health box-restore-N", "start box", false},
		{"during cut-over", "health box", "health box", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			o := newOps("box")
			o.onCall = func(c string) {
				if c == tt.cancelAt {
					cancel() // Ctrl-C arrives while this step runs
					o.fail[tt.cancelAt] = context.Canceled
				}
			}
			state := t.TempDir()
			r := &Restore{Ops: o, Machine: "box", Port: 2222, StateDir: state, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			err := r.Run(ctx, "/b/new")
			if err == nil {
				t.Fatal("restore succeeded")
			}
			safety, _ := Interrupted(state)
			if tt.interrupted != errors.Is(err, ErrInterrupted) || tt.interrupted != (safety == "/b/safety") {
				t.Errorf("interrupted %v: err %v, journal names %q", tt.interrupted, err, safety)
			}
			if tt.interrupted && !strings.Contains(err.Error(), "hermes-box restore /b/safety") {
				t.Errorf("the error does not say how to recover: %v", err)
			}
			idx := slices.Index(o.calls, tt.cancelAt+" !cancelled")
			if idx < 0 {
				idx = slices.Index(o.calls, tt.cancelAt)
			}
			for _, c := range o.calls[idx+1:] {
				if strings.HasSuffix(c, "!cancelled") {
					t.Errorf("cleanup call %q ran on the cancelled context", c)
				}
			}
			if last := o.calls[len(o.calls)-1]; last != tt.wantLast {
				t.Errorf("last call %q, want %q (calls %v)", last, tt.wantLast, o.calls)
			}
		})
	}
}

func TestRestoreDeleteFailureKeepsOriginal(t *testing.T) {
	o := newOps("box")
	o.fail["delete box"] = errBoom
	err := runRestore(t, t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "original machine was preserved") {
		t.Fatalf("err %v", err)
	}
	if last := o.calls[len(o.calls)-1]; last != "start box" {
		t.Errorf("last call %q", last)
	}
}

// TestIsCandidate: the reaper takes exactly the candidate name shape,
// <machine>-restore-<pid>-<nanos>, and nothing that merely starts with it.
func TestIsCandidate(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{candidateName("box", 4242, 1764190000123456789), true},
		{"box-restore-1-0", true},
		{"box-restore-", false},
		{"box-restore-keep", false},
		{"box-restore-12", false},
		{"box-restore-12-", false},
		{"box-restore-12-34-x", false},
		{"box-restore-0012-34", false},
		{"box-restore-12-34x", false},
		{"box-restore-1a2b", false},
		{"box2-restore-12-34", false},
		{"other-box-restore-12-34", false},
	}
	for _, tt := range tests {
		if got := IsCandidate("box", tt.name); got != tt.want {
			t.Errorf("IsCandidate(box, %q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
