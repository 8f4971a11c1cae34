package box

import (
	"context"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// Restart stops the box, then starts and verifies it, under one lock.
func Restart(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "restart", withLock(b, func() error {
		if err := stopBoxChecked(ctx, b, func(m smolvm.Machine) error { return checkExecutorWiring(b, m) }); err != nil {
			return err
		}
		return startBox(ctx, b)
	}))
}
