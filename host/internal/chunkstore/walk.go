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

// trees calls fn with the tree of each of rec's parts named, read from
// the store (each chunk re-hashed), in order.
func (s *Store) trees(ctx context.Context, rec *Record, parts []string, fn func(part string, tree io.Reader) error) error {
	for _, part := range parts {
		tree, err := rec.Parts[part].treeIDs()
		if err != nil {
			return err
		}
		ids := make([]snaptree.ID, len(tree))
		for i, id := range tree {
			ids[i] = id
		}
		if err := fn(part, s.treeReader(ctx, ids)); err != nil {
			return fmt.Errorf("%s of %s: %w", part, rec.Machine, err)
		}
	}
	return nil
}

// treeReader reads the tree of chunks ids from the store, each chunk
// re-hashed; ctx stops it between chunks.
func (s *Store) treeReader(ctx context.Context, ids []snaptree.ID) io.Reader {
	buf := make([]byte, 0, MaxChunk)
	return snaptree.Reader(ids, func(id snaptree.ID) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := s.readGood(ID(id), buf)
		buf = b[:0]
		return b, err
	})
}

// chunks checks that the file chunks of every part of rec add up to
// their files' sizes, sizeOf giving each chunk's size (or why not); no
// file's content is decoded.
func (s *Store) chunks(ctx context.Context, rec *Record, sizeOf func(snaptree.ID) (int64, error)) error {
	return s.trees(ctx, rec, Parts, func(_ string, tree io.Reader) error {
		return snaptree.Entries(tree, func(e snaptree.Entry) error { return e.Chunks(sizeOf, nil) })
	})
}

// Verify checks that every chunk of rec is held and that the trees hold
// together (each tree chunk read and re-hashed), and reads and re-hashes
// the file chunks of this run's sample (sample.go); with readData every
// one. A chunk found corrupt is set aside (quarantine.go): an ErrDamaged
// error here and for every backup verified after that names it.
func (s *Store) Verify(ctx context.Context, rec *Record, readData bool) error {
	buf := make([]byte, 0, MaxChunk)
	smp := s.verifySample()
	return s.chunks(ctx, rec, func(id snaptree.ID) (int64, error) {
		n, ok := s.RawSize(ID(id))
		if !ok {
			return 0, s.notHeld(ID(id))
		}
		if !smp.take(ID(id), n, readData) {
			return n, nil
		}
		b, err := s.readGood(ID(id), buf)
		if err != nil {
			return 0, err
		}
		buf = b[:0]
		return int64(len(b)), nil
	})
}

// notHeld is the error of chunk id not held: set aside as corrupt
// (ErrDamaged) or missing.
func (s *Store) notHeld(id ID) error {
	if _, ok := s.SetAside(id); ok {
		return fmt.Errorf("%w: %s", ErrDamaged, id)
	}
	return fmt.Errorf("%w: %s", ErrMissing, id)
}

// Mark marks every chunk rec needs as live; a chunk the store lacks is
// an ErrMissing error.
func (s *Store) Mark(ctx context.Context, rec *Record, m *Marks) error {
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
	return s.chunks(ctx, rec, func(id snaptree.ID) (int64, error) {
		if !m.Mark(ID(id)) {
			return 0, fmt.Errorf("%w: %s", ErrMissing, ID(id))
		}
		n, _ := s.RawSize(ID(id))
		return n, nil
	})
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
		b, err := s.readGood(ID(id), buf)
		buf = b[:0]
		return b, err
	}
	src := func(ctx context.Context, part string, w io.Writer) error {
		// The bytes of the decoded tree; the compressed size is not
		// known before the end.
		tw, done := progress.TrackEstimate(ctx, "stage "+backup.PartFile(part), 0, w)
		err := s.trees(ctx, rec, []string{part}, func(_ string, tree io.Reader) error { return snaptree.Decode(tree, fetch, tw) })
		done(err)
		return err
	}
	return backup.StageStream(ctx, stateDir, meta, src)
}
