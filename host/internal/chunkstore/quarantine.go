package chunkstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// A chunk found corrupt where the store keeps it (a read that does not
// re-hash to its id: --verify's sample, --read-data, a restore's staging,
// GC's repacking, a tree read back at ingest) is set aside: its copy,
// the chunk in that pack, is named in quarantineFile and from then on
// not held. Has is false for it, so the held list sent to the box leaves
// it out and the next snapshot's writer stores the box's copy anew in a
// new pack; the index then finds that copy, never the one set aside. A
// backup that names the chunk fails verification, its problem saying it
// was set aside (ErrDamaged), until a snapshot has brought it again.

// quarantineFile, in a store's directory, names the chunks set aside:
// one line "<chunk id> <pack id>\n" each (hex), written whole (temp,
// fsync, rename).
const quarantineFile = "quarantine"

// maxQuarantine bounds the chunks quarantineFile names (8.4 MB): more
// set aside fails the read that found them, as a corrupt chunk does.
const maxQuarantine = 1 << 16

// quarantineLine is the length of one line of quarantineFile.
const quarantineLine = 2*64 + 2

// ErrDamaged is a chunk a backup needs that was found corrupt and set
// aside.
var ErrDamaged = errors.New("chunk found corrupt and set aside")

// badKey is one chunk set aside: the chunk in that pack.
type badKey struct{ chunk, pack ID }

// readQuarantine reads the store's quarantineFile; none is empty.
func readQuarantine(dir string) (map[badKey]bool, error) {
	path := filepath.Join(dir, quarantineFile)
	data, err := readRecordFile(path, maxQuarantine*quarantineLine)
	if errors.Is(err, fs.ErrNotExist) {
		return map[badKey]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := map[badKey]bool{}
	for n := 1; len(data) > 0; n++ {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		data = rest
		f := bytes.Fields(line)
		var k badKey
		if ok && len(f) == 2 {
			k.chunk, err = ParseID(string(f[0]))
			if err == nil {
				k.pack, err = ParseID(string(f[1]))
			}
		}
		if !ok || len(f) != 2 || err != nil {
			return nil, fmt.Errorf("%w: %s line %d: not \"<chunk> <pack>\" (remove the file: backups --verify finds the chunks again)", ErrCorrupt, path, n)
		}
		out[k] = true
	}
	return out, nil
}

// setAside records that chunk id, as the index finds it now, is corrupt:
// quarantineFile names it first, then the index no longer finds it. A
// chunk the index does not find, or in a pack not yet published, is
// left alone. The caller holds the operation lock (a read-modify-write
// of quarantineFile; a writer loads it once, at Open), so every read
// that may set a chunk aside runs under it too: Verify's included.
func (s *Store) setAside(id ID) error {
	l, ok := s.idx.find(id)
	if !ok || s.idx.packs[l.pack] == (ID{}) {
		return nil
	}
	k := badKey{id, s.idx.packs[l.pack]}
	bad, err := readQuarantine(s.dir)
	if err != nil {
		return err
	}
	if !bad[k] {
		if len(bad) >= maxQuarantine {
			return fmt.Errorf("setting chunk %s aside: %s names %d chunks already, the most it holds", id, quarantineFile, maxQuarantine)
		}
		bad[k] = true
		lines := make([]string, 0, len(bad))
		for b := range bad {
			lines = append(lines, b.chunk.String()+" "+b.pack.String()+"\n")
		}
		slices.Sort(lines)
		var buf bytes.Buffer
		for _, line := range lines {
			buf.WriteString(line)
		}
		if err := atomicfile.Write(filepath.Join(s.dir, quarantineFile), buf.Bytes(), 0o600); err != nil {
			return fmt.Errorf("setting chunk %s aside: %w", id, err)
		}
	}
	s.idx.setBad(k, int64(l.rlen))
	return nil
}

// readGood is Read of a chunk the store keeps: one found corrupt is set
// aside (setAside) and its error is an ErrDamaged one too.
func (s *Store) readGood(id ID, buf []byte) ([]byte, error) {
	b, err := s.Read(id, buf)
	return b, s.damaged(id, err)
}

// damaged is err, the error of a read of chunk id, with the chunk set
// aside when err says it is corrupt (then an ErrDamaged one too).
func (s *Store) damaged(id ID, err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return err
	}
	if serr := s.setAside(id); serr != nil {
		return fmt.Errorf("%w (and %w)", err, serr)
	}
	return fmt.Errorf("%w: %s (%w)", ErrDamaged, id, err)
}

// SetAside reports whether chunk id is not held because it was set
// aside, and its plaintext length.
func (s *Store) SetAside(id ID) (int64, bool) {
	n, ok := s.idx.badSize[id]
	return n, ok && !s.Has(id)
}

// setBad makes the index find no longer the copy k of a chunk of n bytes.
func (x *index) setBad(k badKey, n int64) {
	if x.bad == nil {
		x.bad, x.badSize = map[badKey]bool{}, map[ID]int64{}
	}
	x.bad[k] = true
	x.badSize[k.chunk] = n
}

// good reports whether the copy of chunk id at l is not set aside.
func (x *index) good(id ID, l loc) bool {
	return len(x.bad) == 0 || !x.bad[badKey{id, x.packs[l.pack]}]
}

// dropBad removes from entries (sorted) the copies set aside, keeping
// their sizes in badSize.
func (x *index) dropBad(entries []entry) []entry {
	if len(x.bad) == 0 {
		return entries
	}
	return slices.DeleteFunc(entries, func(e entry) bool {
		if x.good(e.id, e.loc) {
			return false
		}
		x.badSize[e.id] = int64(e.rlen)
		return true
	})
}

// loadBad reads quarantineFile into x; its entries are dropped as the
// index is loaded.
func (x *index) loadBad(dir string) error {
	bad, err := readQuarantine(dir)
	if err != nil {
		return err
	}
	x.bad, x.badSize = bad, map[ID]int64{}
	return nil
}
