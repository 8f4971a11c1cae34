package backupset

import (
	"context"
	"fmt"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// Stage is backup.Stage for a v2 or an incremental backup: an incremental
// one (its record's signature checked against t first) is staged in one
// pass from its machine's store (chunkstore.Store.Stage: every chunk
// re-hashed, every part listed and checked), its SHA256SUMS signed by
// signer, so the staged copy restores, exports and packages as a v2
// backup's. The staged copy's Source is src. The caller holds the
// operation lock.
func Stage(ctx context.Context, src, stateDir string, t backup.Trust, lim backup.Limits, signer func() (ssh.Signer, error)) (*backup.Staged, error) {
	if !chunkstore.IsIncremental(src) {
		return backup.Stage(ctx, src, stateDir, t, lim)
	}
	rec, err := chunkstore.Load(src, t)
	if err != nil {
		return nil, err
	}
	key, err := signer()
	if err != nil {
		return nil, fmt.Errorf("staging %s: %w", src, err)
	}
	s, err := chunkstore.Open(chunkstore.StoreDir(filepath.Dir(src), rec.Machine))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	staged, err := s.Stage(ctx, rec, stateDir, lim, key)
	if err != nil {
		return nil, fmt.Errorf("staging %s from the chunk store: %w", src, err)
	}
	staged.Source = src
	return staged, nil
}
