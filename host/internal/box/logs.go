package box

import (
	"context"
	"fmt"
	"io"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// Logs prints the last lines of service's log to w, following it when
// follow is set.
func Logs(ctx context.Context, b *Box, w io.Writer, service string, lines int, follow bool) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning {
		return fmt.Errorf("%s is %s; start it with hermes-box start", m.Name, m.State)
	}
	return runningClient(b).Logs(ctx, w, service, lines, follow)
}
