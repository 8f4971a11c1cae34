// Package auditanchor keeps the head of the box's audit chain on the host.
//
// The chain (shared/auditchain) is written and verified inside the box by
// code an attacker in the box can replace: rewriting a verdict and
// re-hashing every line after it, truncating the log or emptying it all
// verify there. So the host reads the log's bytes, verifies the chain
// itself, and keeps what it saw — the count, the head hash and every line's
// hash — in a file of its own. A later log must extend what was recorded:
// every recorded line unchanged, new lines only after them.
package auditanchor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/auditchain"
	"github.com/hermes-box/hermes-box/shared/bounded"
)

// MaxLog bounds the audit log the host reads from the box (some 30 000
// verdicts).
const MaxLog = 16 << 20

// maxFile bounds the anchor file the host reads back.
const maxFile = 64 << 20

// FileName is the anchor's name in the project's state directory.
const FileName = "audit-anchor.json"

// Anchor is what the host saw last time the chain held.
type Anchor struct {
	Count  int       `json:"count"`
	Head   string    `json:"head,omitempty"` // hash of line Count
	Hashes []string  `json:"hashes"`         // hash of every line, in order
	Time   time.Time `json:"time"`
}

// Load reads the anchor at path; a missing file is the zero Anchor.
func Load(path string) (Anchor, error) {
	var a Anchor
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return a, fmt.Errorf("reading the audit anchor: %w", err)
	}
	defer f.Close()
	b, err := bounded.ReadAll(f, maxFile, path)
	if err != nil {
		return a, fmt.Errorf("reading the audit anchor: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("%s: %w", path, err)
	}
	if a.Count != len(a.Hashes) || (a.Count > 0 && a.Head != a.Hashes[a.Count-1]) {
		return a, fmt.Errorf("%s: count %d, head and %d hashes disagree", path, a.Count, len(a.Hashes))
	}
	return a, nil
}

// Save writes a atomically.
func Save(path string, a Anchor) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("recording the audit anchor: %w", err)
	}
	return nil
}

// Check verifies log (the box's audit log, exactly as read, at most MaxLog
// bytes) on the host and checks that it extends a. It returns the verified
// records; the error is a *auditchain.ChainError naming the first bad line
// when the chain is broken or does not extend a. It stops reading at the
// first bad line.
func Check(log io.Reader, a Anchor) ([]auditchain.Record, error) {
	recs, err := auditchain.Verify(bounded.Reader(log, MaxLog, "the gate's audit log"))
	if err != nil {
		return recs, err
	}
	when := a.Time.UTC().Format(time.RFC3339)
	for i := 0; i < a.Count; i++ {
		if i >= len(recs) {
			if len(recs) == 0 {
				return recs, &auditchain.ChainError{Line: 1, Reason: fmt.Sprintf(
					"the log is empty, but the host recorded %d lines at %s: it was emptied or replaced", a.Count, when)}
			}
			return recs, &auditchain.ChainError{Line: i + 1, Reason: fmt.Sprintf(
				"missing: the log has %d lines, but the host recorded %d at %s: it was truncated", len(recs), a.Count, when)}
		}
		if recs[i].Hash != a.Hashes[i] {
			return recs, &auditchain.ChainError{Line: i + 1, Reason: fmt.Sprintf(
				"differs from the line the host recorded at %s: the log was rewritten or replaced from here", when)}
		}
	}
	return recs, nil
}

// Next is the anchor for a log whose verified records are recs.
func Next(recs []auditchain.Record, now time.Time) Anchor {
	a := Anchor{Count: len(recs), Hashes: make([]string, len(recs)), Time: now.UTC()}
	for i, r := range recs {
		a.Hashes[i] = r.Hash
	}
	if a.Count > 0 {
		a.Head = a.Hashes[a.Count-1]
	}
	return a
}

// Record checks log against the anchor at path and, when it extends it,
// records the new head. It returns the verified records and, when the
// chain does not hold, the *auditchain.ChainError (the anchor is kept).
func Record(path string, log io.Reader, now time.Time) ([]auditchain.Record, error) {
	a, err := Load(path)
	if err != nil {
		return nil, err
	}
	recs, err := Check(log, a)
	if err != nil {
		return recs, err
	}
	if len(recs) == a.Count && a.Count > 0 {
		return recs, nil // nothing new
	}
	return recs, Save(path, Next(recs, now))
}
