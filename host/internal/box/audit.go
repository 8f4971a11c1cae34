package box

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/health"
)

// checkAudit is the host's check of the box's audit chain in status.
const checkAudit health.Code = "audit-chain"

// CheckAudit reads the box's audit log (its exact bytes, bounded) through c,
// verifies the chain on the host against the anchor file and records the
// new head when it extends the last one. A broken chain is in the Result;
// the error is for a log that could not be read or an anchor that could
// not be kept.
func CheckAudit(ctx context.Context, c *agent.Client, anchor string) (auditanchor.Result, error) {
	// Verified as it streams: nothing but the records is held, and a
	// log that breaks at line 1 is not read any further.
	pr, pw := io.Pipe()
	type verdict struct {
		res auditanchor.Result
		err error
	}
	done := make(chan verdict, 1)
	go func() {
		res, err := auditanchor.Verify(anchor, pr, time.Now())
		pr.CloseWithError(errAuditRead) // stops the stream when the verdict came first
		done <- verdict{res, err}
	}()
	cerr := c.AuditRaw(ctx, pw)
	pw.CloseWithError(cerr)
	v := <-done
	switch {
	case v.err != nil && (cerr == nil || errors.Is(v.err, bounded.ErrLimit)):
		return v.res, v.err
	case cerr != nil && (v.res.OK || !errors.Is(cerr, errAuditRead)):
		// The log did not come whole: no verdict on it.
		return auditanchor.Result{}, cerr
	}
	return v.res, v.err
}

// errAuditRead ends the stream of an audit log whose verdict is known.
var errAuditRead = errors.New("the audit log was read up to its first bad line")

// auditAnchor is the project's anchor file.
func (b *Box) auditAnchor() string {
	return filepath.Join(b.cfg.StateDir(), auditanchor.FileName)
}

// anchorAudit records the audit chain's head as status and snapshot do,
// returning the host's check of it.
func (b *Box) anchorAudit(ctx context.Context, tr relay.Transport, now time.Time) health.Check {
	ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
	defer cancel()
	res, err := CheckAudit(ctx, agent.New(tr, nil), b.auditAnchor())
	switch {
	case err != nil:
		return hostCheck(false, health.SeverityWarning, "the audit log could not be checked: "+err.Error(), now)
	case !res.OK:
		return hostCheck(false, health.SeverityCritical, res.Err().Error(), now)
	}
	return hostCheck(true, health.SeverityCritical, "audit chain of "+strconv.Itoa(res.Count)+" entries extends the head the host recorded", now)
}
