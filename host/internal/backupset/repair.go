package backupset

import (
	"context"

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
}

// Repair rebuilds the index of every machine's chunk store in dir from
// the packs (chunkstore.Repair), then checks each incremental backup
// against it. The caller holds the operation lock.
func Repair(ctx context.Context, dir string, key ssh.PublicKey) ([]Repaired, error) {
	machines, err := chunkstore.Machines(dir)
	if err != nil {
		return nil, err
	}
	out := []Repaired{}
	for _, m := range machines {
		rep, err := chunkstore.Repair(chunkstore.StoreDir(dir, m))
		if err != nil {
			return out, err
		}
		r := Repaired{Machine: m, Packs: rep.Packs, Chunks: rep.Chunks, Unreadable: rep.Unreadable, Whole: []string{}, Broken: []backup.Entry{}}
		if r.Unreadable == nil {
			r.Unreadable = []string{}
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
