package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/cdc"
)

// partFunc writes one part's chunks with w and returns its record and its
// listing.
type partFunc func(s *Store, w *Writer, part string) (PartRecord, []string, error)

// build writes both parts with fill into the machine's store, commits the
// store's index and publishes the record, signed with meta.Signer; on
// failure the chunks it added are dropped and no backup directory
// appears. The workspace must hold what a restore needs.
func build(ctx context.Context, backupsDir string, meta backup.Meta, fill partFunc) (dir string, rec *Record, err error) {
	if meta.Signer == nil {
		return "", nil, errors.New("snapshot: no key to sign the backup with")
	}
	if err := meta.CheckAnchor(); err != nil {
		return "", nil, err
	}
	if _, err := ReapTemps(backupsDir); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	s, err := Open(StoreDir(backupsDir, meta.Machine))
	if err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	defer s.Close()
	w, err := s.NewWriter()
	if err != nil {
		return "", nil, err
	}
	committed := false
	defer func() {
		if !committed {
			err = errors.Join(err, w.Abort())
		}
	}()
	rec = &Record{Format: RecordFormat, Chunker: cdc.Name, Created: meta.Now.UTC().Format(time.RFC3339),
		Machine: meta.Machine, Label: meta.Label, Smolvm: meta.Smolvm, GOOS: meta.GOOS, AuditAnchor: meta.AuditAnchor,
		Fingerprint: keys.Fingerprint(meta.Signer.PublicKey()), Parts: map[string]PartRecord{}}
	for _, part := range Parts {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		p, names, err := fill(s, w, part)
		if err != nil {
			return "", nil, fmt.Errorf("snapshot of %s: %w", part, err)
		}
		if part == boxlayout.PartWorkspace {
			if err := backup.CheckWorkspace(names, false); err != nil {
				return "", nil, err
			}
		}
		rec.Parts[part] = p
	}
	st := w.Stats()
	rec.Added = Added{Chunks: st.NewChunks, Bytes: st.NewBytes, Stored: st.Stored}
	// Sealed before the commit: a record that would not load leaves the
	// store as it was.
	data, sig, err := rec.seal(meta)
	if err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := w.Commit(); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	committed = true
	if dir, err = publish(backupsDir, meta, data, sig); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	crashPoint("published")
	return dir, rec, nil
}
