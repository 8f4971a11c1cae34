package oci

import (
	"context"
	"path/filepath"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// EnsureActive is what a launcher does before it starts Executor, under one
// lock: when `current` already holds ref's content it stays as it is (no
// network, no switch, nothing pruned; a tag-only change just records the new
// reference); otherwise ref is pulled unless a release holds it already,
// and activated.
func (s *Store) EnsureActive(ctx context.Context, ref Reference) (*Release, error) {
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release() //nolint:errcheck // the lock goes with the file
	if cur, err := s.Current(); err == nil && cur != nil && cur.RepositoryDigest == ref.Canonical() && CheckPayload(cur.Dir) == nil {
		if cur.ImageReference != ref.String() {
			if err := atomicfile.Write(filepath.Join(cur.Dir, metaImageReference), []byte(ref.String()+"\n"), 0o644); err != nil {
				return nil, err
			}
			cur.ImageReference = ref.String()
		}
		s.emit(protocol.LevelInfo, "release "+cur.Name+" is active for "+ref.String())
		return cur, nil
	}
	r, err := s.ensure(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r, s.activate(ctx, r, ref)
}
