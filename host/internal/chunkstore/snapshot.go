package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/cdc"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// Snapshot writes an incremental backup of the parts src streams (gzip
// tars, as the agent's `snapshot write` sends them) below backupsDir:
// the chunks the machine's store lacks, then the store's index, then the
// record, published by rename. Every part is listed with today's rules
// and limits while it is read, and the workspace must hold what a
// restore needs. The record is signed with meta.Signer. On failure the chunks this snapshot added are dropped
// and no backup directory appears. The caller holds the operation lock.
func Snapshot(ctx context.Context, backupsDir string, meta backup.Meta, src backup.PartSource) (dir string, rec *Record, err error) {
	return build(ctx, backupsDir, meta, func(_ *Store, w *Writer, part string) (PartRecord, []string, error) {
		return ingest(ctx, w, part, src, meta.Limits, backupsDir)
	})
}

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
	if err := w.Commit(); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	committed = true
	st := w.Stats()
	rec.Added = Added{Chunks: st.NewChunks, Bytes: st.NewBytes, Stored: st.Stored}
	if dir, err = rec.publish(backupsDir, meta); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	crashPoint("published")
	return dir, rec, nil
}

// ingest reads one part from src into w and returns its record and its
// listing. The stream is bounded as backup.Write bounds it (lim: the part
// cap, the host's free space in dir) and listed (names, entries and
// unpacked size bounded) as it is chunked; a listing that fails stops
// the stream.
func ingest(ctx context.Context, w *Writer, part string, src backup.PartSource, lim backup.Limits, dir string) (PartRecord, []string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(src(ctx, part, lim.Guard(pw, dir, part))) }()
	defer pr.Close()
	lr, lw := io.Pipe()
	type listing struct {
		names []string
		err   error
	}
	listed := make(chan listing, 1)
	go func() {
		names, err := lim.List(ctx, lr)
		if err == nil {
			_, _ = io.Copy(io.Discard, lr) // what follows the archive
		}
		lr.CloseWithError(err)
		listed <- listing{names, err}
	}()
	p, err := encode(io.TeeReader(pr, lw), w)
	lw.CloseWithError(err)
	l := <-listed
	if l.err != nil {
		return PartRecord{}, nil, fmt.Errorf("listing: %w", l.err)
	}
	return p, l.names, err
}

// encode chunks the gzip tar r into w and reads r to its end.
func encode(r io.Reader, w *Writer) (PartRecord, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return PartRecord{}, fmt.Errorf("reading gzip: %w", err)
	}
	// Encode hashes every chunk here, on the host: no need to hash again.
	tree, st, err := snaptree.Encode(zr, func(id snaptree.ID, data []byte) error {
		_, err := w.add(id, data)
		return err
	})
	if err != nil {
		return PartRecord{}, err
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return PartRecord{}, fmt.Errorf("reading gzip: %w", err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return PartRecord{}, err
	}
	p := PartRecord{Entries: st.Entries, Bytes: st.Bytes}
	for _, id := range tree {
		p.Tree = append(p.Tree, ID(id).String())
	}
	return p, nil
}
