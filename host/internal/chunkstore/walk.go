package chunkstore

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// zeros stands in for a chunk's content where only its presence and size
// matter (Verify without reading the data, Mark).
var zeros = make([]byte, MaxChunk)

// walk decodes the parts of rec into the writer out returns for it:
// tree chunks are always read (and re-hashed); file chunks go through
// fetch.
func (s *Store) walk(ctx context.Context, rec *Record, parts []string, fetch snaptree.Fetch, out func(part string) (io.Writer, func() error)) error {
	buf := make([]byte, 0, MaxChunk)
	readTree := func(id snaptree.ID) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := s.Read(ID(id), buf)
		buf = b[:0]
		return b, err
	}
	for _, part := range parts {
		tree, err := rec.Parts[part].treeIDs()
		if err != nil {
			return err
		}
		ids := make([]snaptree.ID, len(tree))
		for i, id := range tree {
			ids[i] = id
		}
		w, done := out(part)
		err = snaptree.Decode(snaptree.Reader(ids, readTree), fetch, w)
		if derr := done(); err == nil {
			err = derr
		}
		if err != nil {
			return fmt.Errorf("%s of %s: %w", part, rec.Machine, err)
		}
	}
	return nil
}

// Verify checks that every chunk of rec is held and that the trees hold
// together; with readData it reads and re-hashes every chunk.
func (s *Store) Verify(ctx context.Context, rec *Record, readData bool) error {
	buf := make([]byte, 0, MaxChunk)
	fetch := func(id snaptree.ID) ([]byte, error) {
		if readData {
			b, err := s.Read(ID(id), buf)
			buf = b[:0]
			return b, err
		}
		n, ok := s.RawSize(ID(id))
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrMissing, ID(id))
		}
		return zeros[:n], nil
	}
	return s.walk(ctx, rec, Parts, fetch, discard)
}

func discard(string) (io.Writer, func() error) { return io.Discard, func() error { return nil } }

// Mark marks every chunk rec needs as live; a chunk the store lacks is
// an ErrMissing error.
func (s *Store) Mark(ctx context.Context, rec *Record, m *Marks) error {
	mark := func(id snaptree.ID) ([]byte, error) {
		if !m.Mark(ID(id)) {
			return nil, fmt.Errorf("%w: %s", ErrMissing, ID(id))
		}
		n, _ := s.RawSize(ID(id))
		return zeros[:n], nil
	}
	for _, p := range rec.Parts {
		tree, err := p.treeIDs()
		if err != nil {
			return err
		}
		for _, id := range tree {
			if !m.Mark(id) {
				return fmt.Errorf("%w: tree chunk %s", ErrMissing, id)
			}
		}
	}
	return s.walk(ctx, rec, Parts, mark, discard)
}

// Stage stages the backup rec (loaded, so its signature checked) below
// stateDir for a restore, an export or a package in one pass from the
// store (backup.StageStream): every chunk read and re-hashed, each part's
// tree decoded into the staged archive, listed and checked as it is
// written, the staged SHA256SUMS signed by signer. On failure nothing is
// left.
func (s *Store) Stage(ctx context.Context, rec *Record, stateDir string, lim backup.Limits, signer ssh.Signer) (*backup.Staged, error) {
	meta, err := rec.Meta()
	if err != nil {
		return nil, err
	}
	meta.Limits, meta.Signer = lim, signer
	buf := make([]byte, 0, MaxChunk)
	fetch := func(id snaptree.ID) ([]byte, error) {
		b, err := s.Read(ID(id), buf)
		buf = b[:0]
		return b, err
	}
	src := func(ctx context.Context, part string, w io.Writer) error {
		// The bytes of the decoded tree; the compressed size is not
		// known before the end.
		tw, done := progress.TrackEstimate(ctx, "stage "+backup.PartFile(part), 0, w)
		err := s.walk(ctx, rec, []string{part}, fetch, func(string) (io.Writer, func() error) { return tw, func() error { return nil } })
		done(err)
		return err
	}
	return backup.StageStream(ctx, stateDir, meta, src)
}
