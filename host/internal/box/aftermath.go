package box

import (
	"context"
	"fmt"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// safetyLabel is the label of a restore's safety snapshot of the box.
const safetyLabel = "pre-restore"

// aftermath ends the error of a failed or interrupted snapshot or restore
// (cmd) with the state the box is in now, the next command and the safety
// snapshots restores left behind (backups no other message
// names). An error whose recovery is already said (an interrupted
// cut-over, a box not returned to its state) is left as it is.
func aftermath(ctx context.Context, b *Box, cmd string, err error) error {
	if err == nil || NeedsRecovery(err) {
		return err
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timing.interruptGrace)
	defer cancel()
	state, next := boxNow(lctx, b, cmd)
	if hint := userr.Hint(err); hint != "" {
		next = hint
	}
	if left := SafetySnapshots(lctx, b); left != "" {
		state += "; " + left
	}
	code := userr.Code(err)
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %w: %w", cmd, ErrInterrupted, err)
		code = userr.ExitInterrupted
	}
	return &userr.Error{Err: fmt.Errorf("%w\nthe box now: %s", err, state), Next: next, Code: code}
}

// boxNow says in what state the box is after cmd failed, and what to run.
func boxNow(ctx context.Context, b *Box, cmd string) (state, next string) {
	name := b.cfg.MachineName
	m, err := b.vm.Status(ctx, name)
	switch {
	case smolvm.IsNotFound(err):
		return "there is no box " + name, "hermes-box restore NAME (a name hermes-box backups prints), or hermes-box init"
	case err != nil:
		return fmt.Sprintf("its state could not be read (%v)", err), "hermes-box status"
	case m.State == smolvm.StateRunning:
		return name + " is running, as it was", "hermes-box status shows it is healthy; then run hermes-box " + cmd + " again"
	case m.State == smolvm.StateStopped:
		return name + " is stopped", "hermes-box start, then run hermes-box " + cmd + " again"
	}
	return fmt.Sprintf("%s is %s", name, m.State), "hermes-box restart"
}

// SafetySnapshots names the box's restore safety snapshots with their
// size and how to delete them ("" when there are none).
func SafetySnapshots(ctx context.Context, b *Box) string {
	entries, _ := Backups(ctx, b, false)
	var left []string
	for _, e := range entries {
		if e.Machine == b.cfg.MachineName && e.Label == safetyLabel {
			left = append(left, fmt.Sprintf("%s (%s)", strings.TrimSuffix(e.Name, backup.Suffix), BackupSize(e)))
		}
	}
	if len(left) == 0 {
		return ""
	}
	return fmt.Sprintf("restores left %d safety snapshot(s) of the box before them: %s; once the box is as you want it, "+
		"delete one with hermes-box backups delete NAME (--force when it is the box's last good backup)", len(left), strings.Join(left, ", "))
}
