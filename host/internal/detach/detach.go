// Package detach gives a cleanup or recovery step a context of its own: it
// survives the caller's cancellation (Ctrl-C, SIGTERM) by a short grace, so
// the step can still put things right, and never outlives its own limit.
package detach

import (
	"context"
	"time"
)

// Context returns a context that ends limit after now, or grace after ctx
// is cancelled (at once plus grace if ctx already is), whichever comes
// first. The cancel function ends it.
func Context(ctx context.Context, limit, grace time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	// A grace timer that fires after the step ended cancels a context
	// already cancelled: nothing to stop.
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return dctx, func() {
		stop()
		cancel()
	}
}
