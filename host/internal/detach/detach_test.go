package detach

import (
	"context"
	"testing"
	"time"
)

// TestDetachedEndsSoonAfterCancel: a step survives the caller's
// cancellation, but only for the grace period; a caller already cancelled
// starts the grace at once; the limit holds without any cancellation.
func TestDetachedEndsSoonAfterCancel(t *testing.T) {
	const grace = 50 * time.Millisecond
	parent, cancelParent := context.WithCancel(t.Context())
	dctx, cancel := Context(parent, time.Hour, grace)
	defer cancel()
	cancelParent()
	if dctx.Err() != nil {
		t.Fatal("the detached context ended with its parent")
	}
	waitDone(t, dctx, "after its parent's cancellation")

	dctx2, cancel2 := Context(parent, time.Hour, grace)
	defer cancel2()
	waitDone(t, dctx2, "of a cancelled caller")

	dctx3, cancel3 := Context(t.Context(), grace, time.Hour)
	defer cancel3()
	waitDone(t, dctx3, "past its limit")
	if dctx3.Err() != context.DeadlineExceeded {
		t.Errorf("past its limit: %v, want the deadline", dctx3.Err())
	}
}

func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the detached context %s outlived its bound", what)
	}
}
