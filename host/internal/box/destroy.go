package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// Destroy stops and deletes the box and the builder, then forgets the
// box's pinned host key, under the operation lock. Images, backups and
// the SSH key are kept. It returns the machines it deleted.
func Destroy(ctx context.Context, b *Box) (deleted []string, err error) {
	err = withLock(b, func() error { return destroy(ctx, b, &deleted) })
	return deleted, err
}

func destroy(ctx context.Context, b *Box, deleted *[]string) error {
	for _, name := range []string{b.cfg.MachineName, b.cfg.BuilderName} {
		exists, err := b.vm.Exists(ctx, name)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		if name == b.cfg.MachineName {
			if err := stopBox(ctx, b); err != nil {
				b.ui.Warn("stopping %s: %v; deleting it anyway", name, err)
			}
		}
		done := b.ui.Step("delete", name)
		err = b.vm.Delete(ctx, name, true)
		done(err)
		if err != nil {
			return err
		}
		*deleted = append(*deleted, name)
		if name == b.cfg.MachineName {
			if err := moveAuditAnchorAside(ctx, b); err != nil {
				return err
			}
		}
	}
	unmarkBuilder(b)
	if err := forgetSettings(b); err != nil {
		return err
	}
	if err := keys.RemoveHostKey(b.cfg.StateDir(), b.cfg.MachineName); err != nil {
		return err
	}
	if err := os.Remove(knownHostsPath(b)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", knownHostsPath(b), err)
	}
	return nil
}

// knownHostsPath is the known_hosts file hermes-box writes for ssh.
func knownHostsPath(b *Box) string {
	return filepath.Join(b.cfg.StateDir(), filenames.KnownHosts)
}
