package auditanchor

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Verify checks log against the anchor at path, records the new head when
// the chain extends it, and returns the verdict. The error is for failures
// to read or write the anchor only; a broken chain is in the Result.
func Verify(path string, log io.Reader, now time.Time) (Result, error) {
	a, err := Load(path)
	if err != nil {
		return Result{}, err
	}
	recs, err := Record(path, log, now)
	res := Result{OK: true, Count: len(recs), Records: recs, Anchored: a.Count}
	var ce *auditchain.ChainError
	switch {
	case errors.As(err, &ce):
		res.OK, res.Broken = false, &Break{Line: ce.Line, Reason: ce.Reason}
	case err != nil:
		return res, err
	}
	if len(recs) > 0 {
		res.Head = recs[len(recs)-1].Hash
	}
	return res, nil
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
