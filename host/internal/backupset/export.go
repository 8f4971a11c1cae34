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
)

// materializePrefix names the temp directory an incremental backup is
// materialized in, below the state directory.
const materializePrefix = ".hermes-box-materialize-"

// Stage is backup.Stage for a v2 or an incremental backup: an incremental
// one (its record's signature checked against t first) is materialized
// from its machine's store, every chunk re-hashed, into a v2 backup
// signed by signer, which is staged (hashed, listed, checked as every v2
// backup is) and then removed. The staged copy's Source is src. The
// caller holds the operation lock.
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
		return nil, fmt.Errorf("materializing %s: %w", src, err)
	}
	s, err := chunkstore.Open(chunkstore.StoreDir(filepath.Dir(src), rec.Machine))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(stateDir, materializePrefix)
	if err != nil {
		return nil, fmt.Errorf("materializing %s: %w", src, err)
	}
	v2, err := s.Materialize(ctx, rec, tmp, lim, key)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("materializing %s: %w", src, err), os.RemoveAll(tmp))
	}
	staged, err := backup.Stage(ctx, v2, stateDir, backup.Trust{Key: key.PublicKey()}, lim)
	if rerr := os.RemoveAll(tmp); err == nil && rerr != nil {
		return nil, errors.Join(rerr, staged.Remove())
	}
	if err != nil {
		return nil, err
	}
	staged.Source = src
	return staged, nil
}
