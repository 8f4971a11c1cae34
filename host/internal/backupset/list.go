package backupset

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// ListOptions say how closely List checks each backup.
type ListOptions struct {
	// Verify checks every backup fully: a v2 backup's signature and every
	// byte, an incremental backup's record, signature and that every
	// chunk it names is held.
	Verify bool
	// ReadData also reads and re-hashes every chunk of an incremental
	// backup (a v2 backup's --verify reads every byte already).
	ReadData bool
	// Key is the project's public key; nil accepts any signer.
	Key ssh.PublicKey
}

// List is the backups in dir, oldest first, v2 and incremental alike
// (backup.Inventory, with each incremental backup described from its
// signed record: its own size, what it added, its chunks checked as o
// says).
func List(ctx context.Context, dir string, o ListOptions) ([]backup.Entry, error) {
	entries, err := backup.Inventory(ctx, dir, o.Verify || o.ReadData, o.Key)
	if err != nil {
		return nil, err
	}
	stores := storeCache{dir: dir, open: map[string]*chunkstore.Store{}}
	defer stores.close()
	for i, e := range entries {
		if chunkstore.IsIncremental(e.Path) {
			entries[i] = inspectIncremental(ctx, e, o, &stores)
		}
	}
	slices.SortStableFunc(entries, func(a, b backup.Entry) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return entries, ctx.Err()
}

// inspectIncremental describes the incremental backup e.Path: its record
// (signature checked against o.Key), then with o.Verify its chunks.
func inspectIncremental(ctx context.Context, e backup.Entry, o ListOptions, stores *storeCache) backup.Entry {
	out := backup.Entry{Name: e.Name, Path: e.Path, Machine: e.Machine, Label: e.Label, Created: e.Created,
		Incremental: true, Verified: backup.StateComplete}
	rec, err := chunkstore.Load(e.Path, backup.Trust{Key: o.Key})
	if err != nil {
		out.Verified, out.Problem = backup.StateInvalid, err.Error()
		return out
	}
	out.Machine, out.Label, out.Added = rec.Machine, rec.Label, rec.Added.Stored
	if t, err := time.Parse(time.RFC3339, rec.Created); err == nil {
		out.Created = t.UTC()
	}
	for _, p := range rec.Parts {
		out.Size += p.Bytes
	}
	if !o.Verify && !o.ReadData {
		return out
	}
	s, err := stores.get(rec.Machine)
	if err == nil {
		err = s.Verify(ctx, rec, o.ReadData)
	}
	if err != nil {
		out.Verified, out.Problem = backup.StateInvalid, err.Error()
		return out
	}
	out.Verified = backup.StateVerified
	return out
}

// verifyEntry fully verifies the backup e of the listing of dir.
func verifyEntry(ctx context.Context, dir string, e backup.Entry, key ssh.PublicKey) error {
	if !e.Incremental {
		_, err := backup.Verify(ctx, e.Path, backup.Trust{Key: key, LegacyOK: true})
		return err
	}
	stores := storeCache{dir: dir, open: map[string]*chunkstore.Store{}}
	defer stores.close()
	if v := inspectIncremental(ctx, e, ListOptions{Key: key, Verify: true}, &stores); !v.Good() {
		return errors.New(v.Problem)
	}
	return nil
}

// storeCache opens each machine's store once, to read it.
type storeCache struct {
	dir  string
	open map[string]*chunkstore.Store
	errs map[string]error
}

func (c *storeCache) get(machine string) (*chunkstore.Store, error) {
	if s, ok := c.open[machine]; ok {
		return s, nil
	}
	if err, ok := c.errs[machine]; ok {
		return nil, err
	}
	s, err := chunkstore.OpenReader(chunkstore.StoreDir(c.dir, machine))
	if err != nil {
		if c.errs == nil {
			c.errs = map[string]error{}
		}
		c.errs[machine] = err
		return nil, err
	}
	c.open[machine] = s
	return s, nil
}

func (c *storeCache) close() {
	for _, s := range c.open {
		s.Close()
	}
}
