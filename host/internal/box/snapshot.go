package box

import (
	"context"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/health"
)

// Snapshot backs the box up under label and returns the backup's path; the
// box is returned to the state it was in.
func Snapshot(ctx context.Context, b *Box, label string) (string, error) {
	if err := requireMachine(ctx, b); err != nil {
		return "", err
	}
	env, err := loadBackupRun(b)
	if err != nil {
		return "", err
	}
	var dir string
	err = env.locked(ctx, func() error {
		resumeServices(ctx, b)
		recordAuditHead(ctx, b)
		dir, err = env.snapshot(ctx, label, false)
		return err
	})
	return dir, aftermath(ctx, b, "snapshot", err)
}

// recordAuditHead records the audit chain's head before a snapshot of a
// running box, and warns when the log no longer extends the last one.
func recordAuditHead(ctx context.Context, b *Box) {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil || m.State != smolvm.StateRunning {
		return
	}
	tr, err := sshRelay(b)
	if err != nil {
		return
	}
	if c := anchorAudit(ctx, b, tr, time.Now().UTC()); c.Status != health.StatusHealthy {
		b.ui.Warn("%s", c.Message)
	}
}
