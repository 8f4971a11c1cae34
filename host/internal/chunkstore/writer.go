package chunkstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// packTarget is the size at which a pack is closed and a new one begun.
const packTarget = 16 << 20

// Writer adds chunks to a store. Chunks it adds are held (Has) at once,
// but nothing names them on disk until Commit has written the index; a
// Writer that fails or is aborted leaves only files that Open or GC
// removes.
type Writer struct {
	s    *Store
	enc  *zstd.Encoder
	pack *hashedFile
	num  uint32 // the open pack's number
	// hdr is the open pack's header so far, as it is written, and
	// entries its count. Past hdrSpill bytes it goes on to spill, a temp
	// file, so that a pack of a million tiny chunks costs no 40 MiB of
	// heap. It is the writer's only copy of what it added; Commit
	// indexes the packs from their headers on disk.
	hdr     []byte
	entries int
	spill   *os.File
	buf     []byte
	done    []ID // the packs published, not yet indexed
	stats   Stats
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
	// No chunk is over MaxChunk: a larger window (8 MiB by default)
	// finds nothing more and costs 7 MiB of heap.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(MaxChunk))
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
	if len(data) <= MaxChunk && Sum(data) != id {
		return false, fmt.Errorf("%w: chunk %s: its content hashes to %s", ErrCorrupt, id, Sum(data))
	}
	return w.add(id, data, nil, false)
}

// addVerified is Put of a chunk the caller has hashed to id, as it came:
// packed is the zstd frame data was decoded from, written as the chunk's
// blob when it is smaller (not compressed again); a nil packed means data
// came plain and is stored plain (its sender found it does not compress).
func (w *Writer) addVerified(id ID, data, packed []byte) (added bool, err error) {
	if len(packed) > 0 && len(packed) < len(data) {
		return w.add(id, data, packed, true)
	}
	return w.add(id, data, data, false)
}

// add adds a chunk, bounded, unless the store holds it; blob and z are
// write's.
func (w *Writer) add(id ID, data, blob []byte, z bool) (added bool, err error) {
	if len(data) > MaxChunk || len(blob) > MaxChunk {
		return false, fmt.Errorf("%w: chunk %s has %d bytes (%d stored), over the limit of %d", ErrCorrupt, id, len(data), len(blob), MaxChunk)
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
	if w.full() {
		return true, w.closePack()
	}
	return true, nil
}

// full reports whether the open pack is to be closed: at packTarget
// bytes or maxPackEntries entries, whichever comes first.
func (w *Writer) full() bool {
	return w.pack.n >= packTarget || w.entries >= maxPackEntries
}

// hdrSpill is the most bytes of the open pack's header held in memory
// (25,575 entries; a pack of 16 MiB holds a few hundred of the
// chunker's chunks).
const hdrSpill = 1 << 20

// spillHeader moves the header held in memory to the spill file.
func (w *Writer) spillHeader() error {
	if w.spill == nil {
		f, err := os.CreateTemp(filepath.Join(w.s.dir, packsDir), tmpPrefix+"hdr-*")
		if err != nil {
			return fmt.Errorf("spilling a pack header: %w", err)
		}
		w.spill = f
	}
	if _, err := w.spill.Write(w.hdr); err != nil {
		return fmt.Errorf("spilling a pack header: %w", err)
	}
	w.hdr = w.hdr[:0]
	return nil
}

// writeSpill copies the spilled header into the open pack and removes
// the spill file.
func (w *Writer) writeSpill() error {
	if w.spill == nil {
		return nil
	}
	defer w.dropSpill()
	if _, err := w.spill.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w.pack, w.spill)
	return err
}

func (w *Writer) dropSpill() {
	if w.spill != nil {
		_ = w.spill.Close()
		_ = os.Remove(w.spill.Name())
		w.spill = nil
	}
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
		w.hdr, w.entries = w.hdr[:0], 0
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
	w.hdr = e.appendTo(w.hdr, false)
	if w.entries++; len(w.hdr) >= hdrSpill {
		if err := w.spillHeader(); err != nil {
			return e, w.pack.fail(err)
		}
	}
	return e, nil
}

// closePack writes the open pack's header and publishes it.
func (w *Writer) closePack() error {
	if err := w.writeSpill(); err != nil {
		return w.pack.fail(err)
	}
	w.hdr = append(binary.LittleEndian.AppendUint32(w.hdr, uint32(w.entries)), packMagic...)
	if _, err := w.pack.Write(w.hdr); err != nil {
		return w.pack.fail(err)
	}
	id, err := w.pack.publish(packExt)
	if err != nil {
		return err
	}
	w.pack = nil
	w.s.idx.packs[w.num] = id
	w.done = append(w.done, id)
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
	if _, err := w.s.writePackIndex(w.done); err != nil {
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
	w.dropSpill()
	if w.pack != nil {
		w.pack.remove()
		w.pack = nil
	}
	for _, p := range w.done {
		_ = removeFile(w.s.packPath(p))
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
