package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock is an exclusive flock on the runtime root's launcher.lock, so two
// launchers never pull, extract or switch `current` at the same time.
type Lock struct{ f *os.File }

// lockPoll is how often a waiting launcher retries the lock.
const lockPoll = 50 * time.Millisecond

// AcquireLock waits for the lock until ctx ends.
func AcquireLock(ctx context.Context, path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Lock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s (another launcher holds it): %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

// Release drops the lock.
func (l *Lock) Release() error {
	defer l.f.Close()
	if err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlocking %s: %w", l.f.Name(), err)
	}
	return nil
}
