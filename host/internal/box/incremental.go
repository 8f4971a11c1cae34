package box

import (
	"context"
	"io"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
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
