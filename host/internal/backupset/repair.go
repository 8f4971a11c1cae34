package backupset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// Repaired is what `backups repair` did to one machine's store.
type Repaired struct {
	Machine string `json:"machine"`
	// Packs and Chunks are what the rebuilt index names.
	Packs  int `json:"packs"`
	Chunks int `json:"chunks"`
	// Unreadable are packs whose header is damaged, left out.
	Unreadable []string `json:"unreadable"`
	// Whole are the machine's incremental backups whose every chunk the
	// store holds afterwards; Broken the others, with why.
	Whole  []string       `json:"whole"`
	Broken []backup.Entry `json:"broken"`
	// Losses are what backups would lack in the rebuilt index; unless
	// forced, the store was then left as it was (Refused).
	Losses  []chunkstore.Loss `json:"losses"`
	Refused bool              `json:"refused"`
}

// Repair rebuilds the index of every machine's chunk store in dir from
// the packs (chunkstore.Repair), then checks each incremental backup
// against it. A store whose rebuilt index would lack chunks that the
// machine's backups (those whose record loads) need is left as it was,
// its Losses said, unless force. The caller holds the operation lock.
func Repair(ctx context.Context, dir string, key ssh.PublicKey, force bool) ([]Repaired, error) {
	machines, err := chunkstore.Machines(dir)
	if err != nil {
		return nil, err
	}
	out := []Repaired{}
	for _, m := range machines {
		rep, err := chunkstore.Repair(ctx, chunkstore.StoreDir(dir, m), keptBackups(dir, m, key), force)
		refused := errors.Is(err, chunkstore.ErrWouldLose)
		if err != nil && !refused {
			return out, err
		}
		r := Repaired{Machine: m, Packs: rep.Packs, Chunks: rep.Chunks, Unreadable: rep.Unreadable, Whole: []string{}, Broken: []backup.Entry{},
			Losses: rep.Losses, Refused: refused}
		if r.Unreadable == nil {
			r.Unreadable = []string{}
		}
		if r.Losses == nil {
			r.Losses = []chunkstore.Loss{}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return out, nil
	}
	entries, err := List(ctx, dir, ListOptions{Verify: true, Key: key})
	if err != nil {
		return out, err
	}
	for i := range out {
		for _, e := range entries {
			switch {
			case !e.Incremental || e.Machine != out[i].Machine:
			case e.Good():
				out[i].Whole = append(out[i].Whole, e.Name)
			default:
				out[i].Broken = append(out[i].Broken, e)
			}
		}
	}
	return out, nil
}

// keptBackups are machine's incremental backups in dir whose record
// loads (one that does not names nothing a restore could use; the check
// after the repair names it).
func keptBackups(dir, machine string, key ssh.PublicKey) []chunkstore.Kept {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []chunkstore.Kept
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		if !de.IsDir() || !strings.HasSuffix(de.Name(), ".hermesbox") || !chunkstore.IsIncremental(p) {
			continue
		}
		if rec, err := chunkstore.Load(p, backup.Trust{Key: key}); err == nil && rec.Machine == machine {
			out = append(out, chunkstore.Kept{Dir: p, Rec: rec})
		}
	}
	return out
}
