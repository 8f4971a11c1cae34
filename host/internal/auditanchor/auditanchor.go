// Package auditanchor keeps the head of the box's audit chain on the host.
//
// The chain (shared/auditchain) is written and verified inside the box by
// code an attacker in the box can replace: rewriting a verdict and
// re-hashing every line after it, truncating the log or emptying it all
// verify there. So the host reads the log's bytes, verifies the chain
// itself, and keeps what it saw in a file of its own: the count of lines,
// their bytes, the SHA-256 of those bytes and the chain hash of the last
// one. A later log must extend what was recorded, every recorded byte
// unchanged. The log is compared as it streams, in constant memory, so no
// size limit is needed.
//
// The anchor only moves forward: one writer at a time (a lock across load,
// check and save) and never a lower count than the file holds. It moves
// back only on purpose: restore installs a backup's anchor, destroy moves
// it aside, and `audit --reset-anchor` does both, logged.
package auditanchor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/bounded"
)

// maxFile bounds the anchor file the host reads back (an anchor written
// before the constant-size format lists every line's hash).
const maxFile = 64 << 20

// Anchor is what the host saw last time the chain held.
type Anchor struct {
	Count int `json:"count"`
	// Bytes is the length of the first Count lines, newlines included,
	// and Prefix the SHA-256 of those bytes (empty in an anchor written
	// before they were recorded: the head alone is checked once).
	Bytes  int64  `json:"bytes"`
	Prefix string `json:"prefix_sha256,omitempty"`
	// Head is the chain hash of line Count.
	Head string    `json:"head,omitempty"`
	Time time.Time `json:"time"`
}

// fileAnchor is the file's form; Hashes is read from an anchor written
// before the constant-size format and never written.
type fileAnchor struct {
	Anchor
	Hashes []string `json:"hashes,omitempty"`
}

// Load reads the anchor at path; a missing file is the zero Anchor.
func Load(path string) (Anchor, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Anchor{}, nil
	}
	if err != nil {
		return Anchor{}, fmt.Errorf("reading the audit anchor: %w", err)
	}
	defer f.Close()
	b, err := bounded.ReadAll(f, maxFile, path)
	if err != nil {
		return Anchor{}, fmt.Errorf("reading the audit anchor: %w", err)
	}
	var fa fileAnchor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fa); err != nil {
		return Anchor{}, fmt.Errorf("%s: %w", path, err)
	}
	a := fa.Anchor
	if fa.Hashes != nil && (a.Count != len(fa.Hashes) || (a.Count > 0 && a.Head != fa.Hashes[a.Count-1])) {
		return Anchor{}, fmt.Errorf("%s: count %d, head and %d hashes disagree", path, a.Count, len(fa.Hashes))
	}
	if err := a.check(); err != nil {
		return Anchor{}, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// check refuses an anchor that cannot describe a log.
func (a Anchor) check() error {
	switch {
	case a.Count < 0 || a.Bytes < 0:
		return fmt.Errorf("negative count %d or bytes %d", a.Count, a.Bytes)
	case a.Count > 0 && a.Head == "":
		return fmt.Errorf("%d lines but no head", a.Count)
	case a.Count == 0 && (a.Head != "" || a.Bytes != 0):
		return errors.New("no lines but a head or bytes")
	}
	return nil
}

// Save writes a atomically. Call it holding the lock.
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

// lockPoll is how often Lock tries again while another command holds it.
const lockPoll = 50 * time.Millisecond

// Lock takes the anchor's lock (an exclusive flock on path+".lock"),
// waiting while another command holds it until ctx ends. The lock dies
// with the process. Call unlock when done.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("locking the audit anchor: %w", err)
	}
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the audit anchor: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking the audit anchor: %w", err)
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another command's check of the audit log: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Install replaces the anchor at path with a (restore: the backup's
// anchor describes the restored log), under the lock. A nil a moves the
// anchor aside instead. It returns where the old anchor went ("" when it
// was replaced or there was none).
func Install(ctx context.Context, path string, a *Anchor, now time.Time) (aside string, err error) {
	unlock, err := Lock(ctx, path)
	if err != nil {
		return "", err
	}
	defer unlock()
	if a != nil {
		if err := a.check(); err != nil {
			return "", fmt.Errorf("installing the audit anchor: %w", err)
		}
		return "", Save(path, *a)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	base := fmt.Sprintf("%s.%s", path, now.UTC().Format("20060102-150405"))
	for n := 1; ; n++ {
		aside = base
		if n > 1 {
			aside = fmt.Sprintf("%s-%d", base, n)
		}
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("moving the audit anchor aside: %w", err)
	}
	return aside, atomicfile.SyncDir(filepath.Dir(path))
}

// Line is a as one line of JSON, as a backup's manifest carries it.
func (a Anchor) Line() string {
	b, _ := json.Marshal(a) // a struct of strings, numbers and a time always marshals
	return string(b)
}

// ParseLine reads an anchor from Line's form.
func ParseLine(s string) (Anchor, error) {
	var a Anchor
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Anchor{}, fmt.Errorf("audit anchor: %w", err)
	}
	if err := a.check(); err != nil {
		return Anchor{}, fmt.Errorf("audit anchor: %w", err)
	}
	return a, nil
}

// ResetLog, beside the anchor, records every explicit reset.
const ResetLog = "audit-anchor-resets.log"

// Reset moves the anchor at path aside on the user's word (`audit
// --reset-anchor`), so the next check anchors whatever the box holds, and
// appends a line saying so to ResetLog. It returns where the old anchor
// went ("" when there was none).
func Reset(ctx context.Context, path string, now time.Time) (string, error) {
	old, err := Load(path)
	if err != nil {
		return "", err
	}
	aside, err := Install(ctx, path, nil, now)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(path), ResetLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return aside, fmt.Errorf("logging the reset of the audit anchor: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s reset the audit anchor of %d lines (head %s, recorded %s); moved to %q\n",
		now.UTC().Format(time.RFC3339), old.Count, old.Head, old.Time.UTC().Format(time.RFC3339), aside)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return aside, fmt.Errorf("logging the reset of the audit anchor: %w", err)
	}
	return aside, nil
}
