package backupset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// OffsiteHint is the way to keep a copy of a backup off this machine:
// an incremental backup's directory alone restores nowhere.
const OffsiteHint = "to keep a copy elsewhere, run `hermes-box backups export NAME` (or `latest`) where the backup was taken: " +
	"it writes backups/hermes-box-export-<name>.tar and its .sha256, one self-contained backup; on the other host " +
	"`hermes-box restore /path/to/hermes-box-export-<name>.tar` (README: \"Keeping a copy elsewhere\")"

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
	storeDir := chunkstore.StoreDir(filepath.Dir(src), rec.Machine)
	if fi, err := os.Stat(storeDir); err != nil || !fi.IsDir() {
		return nil, userr.WithHint(fmt.Errorf("%s is an incremental backup: its directory holds only its record, and its data, the chunk store %s beside it, is not there (%s alone was copied?)",
			src, storeDir, filepath.Base(src)), OffsiteHint)
	}
	s, err := chunkstore.Open(storeDir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	staged, err := s.Stage(ctx, rec, stateDir, lim, key)
	if errors.Is(err, chunkstore.ErrMissing) {
		return nil, userr.WithHint(fmt.Errorf("staging %s from the chunk store: %w", src, err), OffsiteHint)
	}
	if err != nil {
		return nil, fmt.Errorf("staging %s from the chunk store: %w", src, err)
	}
	staged.Source = src
	return staged, nil
}
