package box

import (
	"context"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// Restart stops the box, then starts and verifies it, under one lock. What
// would refuse the start (the Executor's wiring, a smolvm release outside
// the table) refuses before anything stops.
func Restart(ctx context.Context, b *Box) error {
	return interrupted(ctx, b, "restart", withLock(b, func() error {
		check := func(m smolvm.Machine) error {
			if err := checkExecutorWiring(b, m); err != nil {
				return err
			}
			return checkSmolvmVersion(ctx, b)
		}
		if err := stopBoxChecked(ctx, b, check); err != nil {
			return err
		}
		return startBox(ctx, b)
	}))
}
