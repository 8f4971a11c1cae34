// Package browser opens a URL in the user's browser with the platform's
// opener (open on macOS, xdg-open elsewhere).
package browser

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
)

// Open opens url with the platform's opener; without one it does nothing,
// and the URL the caller printed is all there is.
func Open(ctx context.Context, url string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return nil
	}
	if err := exec.CommandContext(ctx, path, url).Run(); err != nil {
		return fmt.Errorf("running %s: %w", opener, err)
	}
	return nil
}
