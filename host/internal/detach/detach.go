// Package detach gives a cleanup or recovery step a context of its own: it
// survives the caller's cancellation (Ctrl-C, SIGTERM) by a short grace, so
// the step can still put things right, and never outlives its own limit.
package detach

import (
	"context"
	"sync"
	"time"
)

// Context returns a context that ends limit after now, or grace after ctx
// is cancelled (at once plus grace if ctx already is), whichever comes
// first. The cancel function releases its timers.
func Context(ctx context.Context, limit, grace time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return dctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
