// Package auditchain reads and verifies the gate's audit log: a hash-chained
// JSON Lines file that the reviewer module (the agent's
// patch/gated_approval.py) appends one verdict to at a time. The agent
// verifies it in the box; the host verifies the same bytes again, because
// whatever runs in the box may have rewritten both the log and its verifier.
//
// Each line is {"entry":BODY,"hash":HEX}: HEX is the SHA-256 of the exact
// bytes of BODY, BODY's "prev" is the previous line's hash (64 zeros on the
// first line) and its "seq" is the line number. Editing a line breaks its own
// hash; rewriting a line with a fresh hash, or removing or inserting one,
// breaks the "prev" or "seq" of the line after it.
package auditchain

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Genesis is the "prev" of the first entry.
var Genesis = strings.Repeat("0", 64)

// MaxLine bounds one line; the reviewer writes far less.
const MaxLine = 1 << 20

// Entry is one gate verdict.
type Entry struct {
	Seq           int64   `json:"seq"`
	Time          string  `json:"time"`
	CommandSHA256 string  `json:"command_sha256"`
	Command       string  `json:"command"` // redacted and bounded
	Decision      string  `json:"decision"`
	Risk          string  `json:"risk"`
	Confidence    float64 `json:"confidence"`
	Reason        string  `json:"reason"`
	Prev          string  `json:"prev"`
}

// Record is a verified line.
type Record struct {
	Line  int    `json:"line"`
	Hash  string `json:"hash"`
	Entry Entry  `json:"entry"`
}

// ChainError names the first line at which the chain does not hold.
type ChainError struct {
	Line   int
	Reason string
}

func (e *ChainError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

type rawLine struct {
	Entry json.RawMessage `json:"entry"`
	Hash  string          `json:"hash"`
}

// Verify reads the whole log and returns the records up to the first line
// that breaks the chain, and a *ChainError for that line (nil if none).
func Verify(r io.Reader) ([]Record, error) {
	var out []Record
	err := Walk(r, func(rec Record, _ []byte) error {
		out = append(out, rec)
		return nil
	})
	return out, err
}

// Walk verifies the log as it reads it, holding one line at a time: fn
// gets each verified record with the line's exact bytes (its newline
// included). It stops at the first line that breaks the chain (a
// *ChainError), the first read error, or the first error fn returns.
func Walk(r io.Reader, fn func(rec Record, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	prev := Genesis
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLong) {
				return &ChainError{Line: n, Reason: err.Error()}
			}
			return fmt.Errorf("reading audit log: %w", err)
		}
		if err != nil { // EOF after a partial line
			return &ChainError{Line: n, Reason: "incomplete last line (torn write)"}
		}
		rec, reason := check(n, line[:len(line)-1], prev)
		if reason != "" {
			return &ChainError{Line: n, Reason: reason}
		}
		if err := fn(rec, line); err != nil {
			return err
		}
		prev = rec.Hash
	}
}

var errLong = errors.New("line longer than 1 MiB")

// readLine returns one line with its newline; io.EOF with a non-empty line
// means the last line had no newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLine {
			return buf, errLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

func check(n int, line []byte, prev string) (Record, string) {
	var raw rawLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil || len(raw.Entry) == 0 || raw.Hash == "" || dec.More() {
		return Record{}, "not an audit record"
	}
	sum := sha256.Sum256(raw.Entry)
	if hex.EncodeToString(sum[:]) != raw.Hash {
		return Record{}, "hash does not match the entry: this line was altered"
	}
	var e Entry
	dec = json.NewDecoder(bytes.NewReader(raw.Entry))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Record{}, "entry does not have the audit schema: " + err.Error()
	}
	if e.Prev != prev {
		return Record{}, fmt.Sprintf("prev does not match the hash of line %d: a line before it was altered, removed or inserted", n-1)
	}
	if e.Seq != int64(n) {
		return Record{}, fmt.Sprintf("seq is %d, want %d: a line was removed or inserted", e.Seq, n)
	}
	return Record{Line: n, Hash: raw.Hash, Entry: e}, ""
}
