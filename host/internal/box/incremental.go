package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/progress"
)

// incremental is the snapshot's writer when HERMES_BOX_SNAPSHOT_INCREMENTAL
// is set: the agent's `snapshot chunks` for each part into the machine's
// chunk store, only new chunks crossing the relay. The progress line
// tracks the bytes the agent read; each part ends with a line of the
// bytes read, new and sent.
func (e *backupRun) incremental(meta backup.Meta) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		name := meta.Machine
		src := func(ctx context.Context, part string, held io.Reader, w io.Writer) error {
			c, err := e.ops().agent(ctx, name, e.box.cfg.SSHPort)
			if err != nil {
				return err
			}
			return c.SnapshotChunks(ctx, part, held, w)
		}
		bar := &partBar{r: progress.FromContext(ctx)}
		report := func(p chunkstore.PartProgress) {
			bar.set(p)
			if p.Done {
				bar.done(nil)
				e.box.ui.Info("snapshot %s: read %s, new %s, sent %s", p.Part,
					progress.Bytes(p.Read), progress.Bytes(p.New), progress.Bytes(p.Sent))
			}
		}
		dir, rec, err := chunkstore.Ingest(ctx, e.box.cfg.BackupsDir(), meta, src, report)
		bar.done(err)
		if err != nil {
			return "", err
		}
		e.box.ui.Info("the snapshot added %d chunks, %s (%s stored)", rec.Added.Chunks,
			progress.Bytes(rec.Added.Bytes), progress.Bytes(rec.Added.Stored))
		return dir, nil
	}
}

// partBar is the transfer line of the part being received: the bytes the
// agent read.
type partBar struct {
	r    *progress.Renderer
	t    *progress.Transfer
	part string
	read int64
}

func (b *partBar) set(p chunkstore.PartProgress) {
	if b.r == nil {
		return
	}
	if b.t == nil || b.part != p.Part {
		b.done(nil)
		b.t, b.part, b.read = b.r.Transfer("snapshot "+p.Part+" (read)", 0), p.Part, 0
	}
	b.t.Add(p.Read - b.read)
	b.read = p.Read
}

func (b *partBar) done(err error) {
	if b.t != nil {
		b.t.Done(err)
		b.t = nil
	}
}

// materializePrefix names the directory below the state directory that a
// restore writes an incremental backup out into.
const materializePrefix = ".materialize-"

// materialized is an incremental backup written out as a hermes-box-v2
// backup (every chunk read and re-hashed) below the state directory, for
// the restore to stage as any other; remove deletes it.
func materialized(ctx context.Context, env *backupRun, src string) (dir string, remove func(), err error) {
	cfg := env.box.cfg
	rec, err := chunkstore.Load(src, env.trust(false))
	if err != nil {
		return "", nil, err
	}
	signer, err := keys.LoadProjectKey(cfg.SSHKeyPath())
	if err != nil {
		return "", nil, fmt.Errorf("restore: the project key signs the backup it reads from the chunk store: %w", err)
	}
	s, err := chunkstore.Open(chunkstore.StoreDir(cfg.BackupsDir(), rec.Machine))
	if err != nil {
		return "", nil, err
	}
	defer s.Close()
	if err := os.MkdirAll(cfg.StateDir(), 0o700); err != nil {
		return "", nil, err
	}
	// What an interrupted restore left (the caller holds the lock).
	stale, _ := filepath.Glob(filepath.Join(cfg.StateDir(), materializePrefix+"*"))
	for _, d := range stale {
		if err := os.RemoveAll(d); err != nil {
			return "", nil, fmt.Errorf("removing what an interrupted restore left: %w", err)
		}
	}
	parent, err := os.MkdirTemp(cfg.StateDir(), materializePrefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(parent) }
	if dir, err = s.Materialize(ctx, rec, parent, env.limits(), signer); err != nil {
		remove()
		return "", nil, errors.Join(fmt.Errorf("reading %s from the chunk store", src), err)
	}
	return dir, remove, nil
}

// stage stages the backup src for a restore: a hermes-box-v2 backup as it
// is, an incremental one once materialized.
func stage(ctx context.Context, env *backupRun, src string, legacyOK bool) (*backup.Staged, error) {
	if !chunkstore.IsIncremental(src) {
		return backup.Stage(ctx, src, env.box.cfg.StateDir(), env.trust(legacyOK), env.limits())
	}
	dir, remove, err := materialized(ctx, env, src)
	if err != nil {
		return nil, err
	}
	defer remove()
	staged, err := backup.Stage(ctx, dir, env.box.cfg.StateDir(), env.trust(false), env.limits())
	if err != nil {
		return nil, err
	}
	staged.Source = src
	return staged, nil
}
