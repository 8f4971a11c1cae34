package auditanchor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/hermes-box/hermes-box/shared/auditchain"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// Result is the host's verdict on the box's audit log: what `hermes-box
// audit --json` prints. Its fields are those of the agent's own result, so
// scripts read either.
type Result struct {
	OK      bool                `json:"ok"`
	Count   int                 `json:"entries"`
	Head    string              `json:"head,omitempty"`
	Broken  *Break              `json:"broken,omitempty"`
	Records []auditchain.Record `json:"records,omitempty"`
	// Anchored is how many lines the host had recorded before this check.
	Anchored int `json:"anchored"`
}

// Break names the first line at which the chain does not hold.
type Break struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// Options are how Verify reads one log.
type Options struct {
	Now time.Time
	// Keep keeps the records in the Result, for display; without it only
	// the count and the anchor's few fields are held.
	Keep bool
	// FromBox reports whether a stream error is the box's doing (its verb
	// failing, a bound it broke) rather than the host giving up or the
	// connection failing; nil: none is.
	FromBox func(error) bool
}

// Verify checks the log against the anchor at path as it streams, holding
// the anchor's lock from load to save, and records the new head when the
// log extends the anchor. A log that differs within the anchored lines, or
// ends short of them, is broken in the Result however its stream ended
// (an error from the box, a size, a clean end); the error is for a log
// that could not be read (the host's own deadline, a connection that
// failed before any byte) or an anchor that could not be kept.
func Verify(ctx context.Context, path string, log io.Reader, o Options) (Result, error) {
	unlock, err := Lock(ctx, path)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	a, err := Load(path)
	if err != nil {
		return Result{}, err
	}
	c := &checker{a: a, h: sha256.New(), keep: o.Keep, when: a.Time.UTC().Format(time.RFC3339)}
	werr := auditchain.Walk(log, c.line)
	res := Result{OK: true, Count: c.n, Records: c.recs, Anchored: a.Count, Head: c.head}
	var ce *auditchain.ChainError
	switch {
	case errors.As(werr, &ce):
	case werr == nil:
		ce = c.short("")
	case c.n < a.Count && (c.off > 0 || (o.FromBox != nil && o.FromBox(werr))):
		ce = c.short(werr.Error())
	default:
		return Result{}, werr
	}
	if ce != nil {
		res.OK, res.Broken = false, &Break{Line: ce.Line, Reason: ce.Reason}
		return res, nil
	}
	if c.n > a.Count || (c.n > 0 && a.Prefix == "") {
		return res, Save(path, Anchor{Count: c.n, Bytes: c.off, Prefix: hex.EncodeToString(c.h.Sum(nil)), Head: c.head, Time: o.Now.UTC()})
	}
	return res, nil
}

// checker compares a log with the anchor line by line.
type checker struct {
	a    Anchor
	n    int
	off  int64     // bytes of the lines so far
	h    hash.Hash // of the lines so far
	head string
	keep bool
	recs []auditchain.Record
	when string
}

func (c *checker) line(rec auditchain.Record, line []byte) error {
	c.n++
	c.off += int64(len(line))
	c.h.Write(line)
	c.head = rec.Hash
	if c.keep {
		c.recs = append(c.recs, rec)
	}
	a := c.a
	switch {
	case c.n > a.Count:
		return nil
	case a.Prefix != "" && c.off > a.Bytes,
		c.n == a.Count && (rec.Hash != a.Head || a.Prefix != "" && (c.off != a.Bytes || hex.EncodeToString(c.h.Sum(nil)) != a.Prefix)):
		return &auditchain.ChainError{Line: c.n, Reason: fmt.Sprintf(
			"lines 1-%d differ from the %d the host recorded at %s: the log was rewritten or replaced at or before this line", c.n, a.Count, c.when)}
	}
	return nil
}

// short is the break of a log that ended before the anchored lines did,
// nil when it did not; how names a stream that ended with an error.
func (c *checker) short(how string) *auditchain.ChainError {
	if c.n >= c.a.Count {
		return nil
	}
	if how != "" {
		how = " (the stream ended with: " + how + ")"
	}
	if c.n == 0 {
		return &auditchain.ChainError{Line: 1, Reason: fmt.Sprintf(
			"the log is empty%s, but the host recorded %d lines at %s: it was emptied or replaced", how, c.a.Count, c.when)}
	}
	return &auditchain.ChainError{Line: c.n + 1, Reason: fmt.Sprintf(
		"missing: the log has %d lines%s, but the host recorded %d at %s: it was truncated", c.n, how, c.a.Count, c.when)}
}

// Err is the broken chain as an error, nil when it holds.
func (r Result) Err() error {
	if r.OK {
		return nil
	}
	return fmt.Errorf("the gate's audit log does not hold at line %d: %s", r.Broken.Line, r.Broken.Reason)
}

// WriteJSON prints r as JSON, with what a terminal could obey escaped.
func (r Result) WriteJSON(w io.Writer, withRecords bool) error {
	if !withRecords {
		r.Records = nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.JSON(b), '\n'))
	return err
}

// WriteText prints the entries (when show is set) and the verdict, every
// string from the box made safe to show.
func (r Result) WriteText(w io.Writer, show bool) error {
	if show {
		for _, rec := range r.Records {
			x := rec.Entry
			fmt.Fprintf(w, "%4d %s %-8s risk=%-8s conf=%.2f %s\n       %s\n",
				termsafe.Args(x.Seq, x.Time, x.Decision, x.Risk, x.Confidence, x.Command, x.Reason)...)
		}
	}
	if r.OK {
		_, err := fmt.Fprintf(w, "audit log: %d entries, chain intact and extending the %d the host recorded\n", r.Count, r.Anchored)
		return err
	}
	_, err := fmt.Fprintf(w, "audit log: chain BROKEN at line %d: %s\n", r.Broken.Line, termsafe.String(r.Broken.Reason))
	return err
}
