package chunkstore

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// packTarget is the size at which a pack is closed and a new one begun.
const packTarget = 16 << 20

// Writer adds chunks to a store. Chunks it adds are held (Has) at once,
// but nothing names them on disk until Commit has written the index; a
// Writer that fails or is aborted leaves only files that Open or GC
// removes.
type Writer struct {
	s     *Store
	enc   *zstd.Encoder
	pack  *hashedFile
	num   uint32 // the open pack's number
	hdr   []packEntry
	buf   []byte
	done  []packGroup
	stats Stats
}

// Stats count what a Writer was given and what it added.
type Stats struct {
	// Chunks and Bytes are every chunk given to Put, with repeats.
	Chunks int64
	Bytes  int64
	// NewChunks, NewBytes and Stored are the chunks the store did not
	// hold: their count, their plaintext and their compressed size.
	NewChunks int64
	NewBytes  int64
	Stored    int64
}

// NewWriter starts adding chunks to s.
func (s *Store) NewWriter() (*Writer, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("starting a chunk store write: %w", err)
	}
	return &Writer{s: s, enc: enc}, nil
}

// Stats reports what w was given so far.
func (w *Writer) Stats() Stats { return w.stats }

// Put adds the chunk data, which the caller names id, compressed here
// when that makes it smaller. It re-hashes data and refuses a mismatch or
// a chunk over MaxChunk. A chunk the store holds is not written again;
// added says whether this one was new.
func (w *Writer) Put(id ID, data []byte) (added bool, err error) {
	return w.put(id, data, nil, false)
}

// PutStored is Put of a chunk that arrived compressed: packed is the zstd
// frame the caller decoded data from, written as the chunk's blob instead
// of compressing data again. A nil packed means data arrived plain and is
// stored plain (its sender found it does not compress).
func (w *Writer) PutStored(id ID, data, packed []byte) (added bool, err error) {
	if len(packed) > 0 && len(packed) < len(data) {
		return w.put(id, data, packed, true)
	}
	return w.put(id, data, data, false)
}

// put checks and adds a chunk whose blob is given (write's blob and z).
func (w *Writer) put(id ID, data, blob []byte, z bool) (added bool, err error) {
	if len(data) > MaxChunk || len(blob) > MaxChunk {
		return false, fmt.Errorf("%w: chunk %s has %d bytes (%d stored), over the limit of %d", ErrCorrupt, id, len(data), len(blob), MaxChunk)
	}
	if Sum(data) != id {
		return false, fmt.Errorf("%w: chunk %s: its content hashes to %s", ErrCorrupt, id, Sum(data))
	}
	w.stats.Chunks++
	w.stats.Bytes += int64(len(data))
	if w.s.Has(id) {
		return false, nil
	}
	e, err := w.write(id, data, blob, z)
	if err != nil {
		return false, err
	}
	w.s.idx.add(id, loc{w.num, e.off, e.slen, e.rlen, e.zstd})
	w.stats.NewChunks++
	w.stats.NewBytes += int64(len(data))
	w.stats.Stored += int64(e.slen)
	if w.pack.n >= packTarget {
		return true, w.closePack()
	}
	return true, nil
}

// write appends chunk id to the open pack, opening one when needed, and
// returns its header entry. The blob is data, or packed when z (its zstd
// frame); a nil blob is data compressed here when that makes it smaller.
func (w *Writer) write(id ID, data, blob []byte, z bool) (packEntry, error) {
	if w.pack == nil {
		var err error
		if w.pack, err = createHashed(filepath.Join(w.s.dir, packsDir)); err != nil {
			return packEntry{}, err
		}
		w.num = uint32(len(w.s.idx.packs))
		w.s.idx.packs = append(w.s.idx.packs, ID{}) // named when published
		w.hdr = w.hdr[:0]
	}
	e := packEntry{id: id, off: uint32(w.pack.n), rlen: uint32(len(data)), zstd: z}
	if blob == nil {
		blob = data
		if w.buf = w.enc.EncodeAll(data, w.buf[:0]); len(w.buf) < len(data) {
			blob, e.zstd = w.buf, true
		}
	}
	e.slen = uint32(len(blob))
	if _, err := w.pack.Write(blob); err != nil {
		return e, w.pack.fail(err)
	}
	w.hdr = append(w.hdr, e)
	return e, nil
}

// closePack writes the open pack's header and publishes it.
func (w *Writer) closePack() error {
	var b []byte
	for _, e := range w.hdr {
		b = e.appendTo(b, false)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(w.hdr)))
	b = append(b, packMagic...)
	if _, err := w.pack.Write(b); err != nil {
		return w.pack.fail(err)
	}
	id, err := w.pack.publish(packExt)
	if err != nil {
		return err
	}
	w.pack = nil
	w.s.idx.packs[w.num] = id
	w.done = append(w.done, packGroup{pack: id, entries: slices.Clone(w.hdr)})
	crashPoint("pack-published")
	return nil
}

// flush publishes the open pack, so that Read finds its chunks; no
// index names it yet.
func (w *Writer) flush() error {
	if w.pack == nil {
		return nil
	}
	return w.closePack()
}

// Commit publishes the last pack and an index naming every pack this
// writer wrote. After Commit the chunks survive a crash; a snapshot
// record that references them may be published.
func (w *Writer) Commit() error {
	defer w.enc.Close()
	if w.pack != nil {
		if err := w.closePack(); err != nil {
			return w.reload(err)
		}
	}
	if len(w.done) == 0 {
		return nil
	}
	if _, err := w.s.writeIndex(w.done); err != nil {
		return w.reload(err)
	}
	crashPoint("index-published")
	w.done = nil
	return nil
}

// Abort drops what w added: its open pack, and the packs it published,
// which no index names yet.
func (w *Writer) Abort() error {
	defer w.enc.Close()
	if w.pack != nil {
		w.pack.remove()
		w.pack = nil
	}
	for _, g := range w.done {
		_ = removeFile(w.s.packPath(g.pack))
	}
	w.done = nil
	return w.reload(nil)
}

// reload makes the store's index what is on disk again, after a failed
// or aborted write.
func (w *Writer) reload(cause error) error {
	err := w.s.load()
	switch {
	case err == nil:
		return cause
	case cause == nil:
		return err
	default:
		return fmt.Errorf("%w (and reloading the index: %w)", cause, err)
	}
}
