package chunkstore

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// What the held list reveals. The prefixes the host sends a box name
// chunks the store holds; a box that could read them all could confirm
// guessed content of any backup of the machine, those of a box destroyed
// before it included. So the list names only the chunks of the newest
// backup taken of the same box (backup.Meta.Box, its pinned host key:
// new after destroy and init), which that box held itself; the box's
// first snapshot after init gets an empty list and sends every chunk
// (the store still keeps each once). A box restored from one of the
// machine's backups holds exactly that backup's content: until it has a
// backup of its own, the list names that backup's chunks (NoteRestored).
// The committed token is that backup's too.

// boxFile, in a machine's store, names the box whose backups the held
// list may reveal and the first of them.
const boxFile = "box.json"

// maxBoxFile bounds boxFile.
const maxBoxFile = 4 << 10

// storeBox is boxFile's content.
type storeBox struct {
	Box string `json:"box"`
	// Since is the Created of the box's first backup; backups created
	// since are its own. Empty: every backup (a store from before the
	// file, whose backups are taken as the box's).
	Since string `json:"since"`
	// Restored names the backup (its directory) the box was restored
	// from, known until the box has one of its own.
	Restored string `json:"restored,omitempty"`
}

// knownBackup is the newest incremental backup of machine that meta's
// box took itself, else the one it was restored from, or nil.
func knownBackup(backupsDir string, meta backup.Meta) *Record {
	sb, ok := readStoreBox(StoreDir(backupsDir, meta.Machine))
	if ok && sb.Box != meta.Box {
		return nil
	}
	dirs, recs, err := Backups(backupsDir, meta.Machine, backup.Trust{Key: meta.Signer.PublicKey()})
	if err != nil {
		return nil
	}
	var own, from *Record
	for i, r := range recs {
		if cmpCreated(r.Created, sb.Since) >= 0 && (own == nil || cmpCreated(r.Created, own.Created) > 0) {
			own = r
		}
		if sb.Restored != "" && filepath.Base(dirs[i]) == sb.Restored {
			from = r
		}
	}
	if own != nil {
		return own
	}
	return from
}

// NoteRestored records that machine's box, box (its pinned host key),
// was just (now) restored from the backup in src: when src is one of the
// machine's incremental backups, the held list of the box's next
// snapshot names its chunks (the box holds exactly its content), and no
// other backup's until the box has one of its own. Without a store there
// is nothing to note.
func NoteRestored(backupsDir, machine, box, src string, now time.Time) error {
	dir := StoreDir(backupsDir, machine)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	sb := storeBox{Box: box, Since: now.UTC().Format(time.RFC3339)}
	if filepath.Dir(filepath.Clean(src)) == filepath.Clean(backupsDir) {
		sb.Restored = filepath.Base(src)
	}
	return writeStoreBox(dir, sb)
}

func readStoreBox(dir string) (storeBox, bool) {
	var sb storeBox
	data, err := readRecordFile(filepath.Join(dir, boxFile), maxBoxFile)
	if err != nil || json.Unmarshal(data, &sb) != nil {
		return storeBox{}, false
	}
	return sb, true
}

// noteBox records, after rec of meta's box was published, that the
// store's box is that one: from a new box's first backup on, the held
// list names its backups' chunks only. A failure leaves the file as it
// was: the next snapshot's list is then empty, never another box's.
func noteBox(backupsDir string, meta backup.Meta, rec *Record) error {
	dir := StoreDir(backupsDir, meta.Machine)
	sb, ok := readStoreBox(dir)
	switch {
	case ok && sb.Box == meta.Box:
		return nil
	case !ok:
		if _, err := os.Stat(filepath.Join(dir, boxFile)); !errors.Is(err, fs.ErrNotExist) {
			sb = storeBox{Box: meta.Box, Since: rec.Created} // unreadable: this box's from now on
		} else {
			sb = storeBox{Box: meta.Box, Since: knownSince(backupsDir, meta, rec)}
		}
	default:
		sb = storeBox{Box: meta.Box, Since: rec.Created}
	}
	return writeStoreBox(dir, sb)
}

func writeStoreBox(dir string, sb storeBox) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, boxFile), append(data, '\n'), 0o600)
}

// knownSince is where a store without boxFile starts its box's backups:
// at rec when it is the machine's first, else at the first (a store from
// before the file: its backups are taken as the box's).
func knownSince(backupsDir string, meta backup.Meta, rec *Record) string {
	_, recs, err := Backups(backupsDir, meta.Machine, backup.Trust{Key: meta.Signer.PublicKey()})
	if err != nil || len(recs) <= 1 {
		return rec.Created
	}
	return ""
}

// heldPrefixes are the chunkwire prefixes of every chunk rec names that
// the store holds, its trees' own included, sorted without repeats; none
// for a nil rec. A chunk set aside as corrupt is not held: the box sends
// it again.
func (s *Store) heldPrefixes(ctx context.Context, rec *Record) ([]uint64, error) {
	if rec == nil {
		return nil, nil
	}
	var out []uint64
	for _, p := range rec.Parts {
		tree, err := p.treeIDs()
		if err != nil {
			return nil, err
		}
		for _, id := range tree {
			if s.Has(id) {
				out = append(out, chunkwire.Prefix(id))
			}
		}
	}
	err := s.chunks(ctx, rec, func(id snaptree.ID) (int64, error) {
		n, ok := s.RawSize(ID(id))
		if bad, aside := s.SetAside(ID(id)); !ok && aside {
			return bad, nil
		}
		if !ok {
			return 0, ErrMissing
		}
		out = append(out, chunkwire.Prefix(id))
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
