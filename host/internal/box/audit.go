package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/health"
)

// checkAudit is the host's check of the box's audit chain in status.
const checkAudit health.Code = "audit-chain"

// CheckAudit reads the box's audit log (its exact bytes) through c and
// verifies the chain on the host against the anchor file as it streams,
// recording the new head when it extends the last one; keep keeps the
// records for display. A broken chain, or a log that ends short of the
// anchor however its stream ended, is in the Result; the error is for a
// log that could not be read or an anchor that could not be kept.
func CheckAudit(ctx context.Context, c *agent.Client, anchor string, keep bool) (auditanchor.Result, error) {
	pr, pw := io.Pipe()
	type verdict struct {
		res auditanchor.Result
		err error
	}
	done := make(chan verdict, 1)
	go func() {
		res, err := auditanchor.Verify(ctx, anchor, pr, auditanchor.Options{Now: time.Now(), Keep: keep, FromBox: fromBox})
		pr.CloseWithError(errAuditRead) // stops the stream when the verdict came first
		done <- verdict{res, err}
	}()
	pw.CloseWithError(c.AuditRaw(ctx, pw))
	v := <-done
	return v.res, v.err
}

// fromBox reports a stream error the box caused: its verb failed.
func fromBox(err error) bool {
	var ee *agent.ExitError
	return errors.As(err, &ee)
}

// errAuditRead ends the stream of an audit log whose verdict is known.
var errAuditRead = errors.New("the audit log was read up to its first bad line")

// auditAnchor is the project's anchor file.
func auditAnchor(b *Box) string {
	return filepath.Join(b.cfg.StateDir(), filenames.AuditAnchor)
}

// anchorAudit records the audit chain's head as status and snapshot do,
// returning the host's check of it.
func anchorAudit(ctx context.Context, b *Box, tr relay.Transport, now time.Time) health.Check {
	ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
	defer cancel()
	res, err := CheckAudit(ctx, agent.New(tr, nil), auditAnchor(b), false)
	switch {
	case err != nil:
		return hostCheck(false, health.SeverityWarning, "the audit log could not be checked: "+err.Error(), now)
	case !res.OK:
		return hostCheck(false, health.SeverityCritical, res.Err().Error(), now)
	}
	return hostCheck(true, health.SeverityCritical, "audit chain of "+strconv.Itoa(res.Count)+" entries extends the head the host recorded", now)
}

// auditAnchorLine is the host's audit anchor for a backup's manifest, ""
// when there is none (or it cannot be read: said, and the backup carries
// none).
func auditAnchorLine(b *Box) string {
	a, err := auditanchor.Load(auditAnchor(b))
	if err != nil {
		b.ui.Warn("the backup carries no audit anchor: %v", err)
		return ""
	}
	if a.Count == 0 {
		return ""
	}
	return a.Line()
}

// installAuditAnchor puts a restored backup's anchor in place: it
// describes the restored log. A backup without one (nil) leaves no anchor
// that could raise a false alarm: the host's is moved aside, and said.
func installAuditAnchor(ctx context.Context, b *Box, a *auditanchor.Anchor) error {
	aside, err := auditanchor.Install(ctx, auditAnchor(b), a, time.Now())
	switch {
	case err != nil:
		return err
	case a != nil:
		b.ui.Info("installed the backup's audit anchor (%d lines)", a.Count)
	case aside != "":
		b.ui.Warn("the backup carries no audit anchor: the host's was moved aside to %s; the restored audit log is anchored at its next check", aside)
	}
	return nil
}

// moveAuditAnchorAside moves the anchor of a deleted box aside, saying so:
// the next box starts a new log.
func moveAuditAnchorAside(ctx context.Context, b *Box) error {
	aside, err := auditanchor.Install(ctx, auditAnchor(b), nil, time.Now())
	if err == nil && aside != "" {
		b.ui.Info("moved the audit anchor of the deleted box aside to %s", aside)
	}
	return err
}

// ErrAuditBroken is the error of an audit whose chain does not hold; the
// verdict itself is in the Result, printed once by the caller.
var ErrAuditBroken = errors.New("the audit chain does not hold")

// AuditOptions are audit's flags.
type AuditOptions struct {
	// Reset moves the host's anchor aside first (--reset-anchor).
	Reset bool
	// Keep keeps the records for display (not --verify).
	Keep bool
}

// Audit checks the running box's audit log against the project's anchor
// (CheckAudit), after moving the anchor aside when opts.Reset asks. A
// chain that does not hold is the Result and an error wrapping
// ErrAuditBroken with the next step.
func Audit(ctx context.Context, b *Box, opts AuditOptions) (auditanchor.Result, error) {
	c, err := QuietClient(ctx, b, "the audit log is read from the running box")
	if err != nil {
		return auditanchor.Result{}, err
	}
	return AuditWith(ctx, c, auditAnchor(b), opts)
}

// AuditWith is Audit through the agent client c, with the anchor file
// anchor.
func AuditWith(ctx context.Context, c *agent.Client, anchor string, opts AuditOptions) (auditanchor.Result, error) {
	if opts.Reset {
		aside, err := auditanchor.Reset(ctx, anchor, time.Now())
		if err != nil {
			return auditanchor.Result{}, err
		}
		slog.Warn("audit anchor reset: this check anchors the log the box holds now", "moved_to", aside,
			"logged_in", filepath.Join(filepath.Dir(anchor), auditanchor.ResetLog))
	}
	res, err := CheckAudit(ctx, c, anchor, opts.Keep)
	if err != nil {
		return res, fmt.Errorf("reading the audit log from the box: %w", err)
	}
	if !res.OK {
		return res, userr.WithHint(fmt.Errorf("%w (the verdict above)", ErrAuditBroken),
			"the box's log was changed after the host recorded it: keep the box as it is, compare with a backup's log "+
				"(hermes-box backups; restore one to inspect it), and once you have dealt with it, hermes-box audit --reset-anchor anchors what the box holds now")
	}
	return res, nil
}
