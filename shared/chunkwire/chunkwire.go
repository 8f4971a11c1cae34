// Package chunkwire is the wire format of an incremental snapshot part
// between the host and the agent's `snapshot chunks PART`.
//
// The host writes, on the verb's stdin, what its store holds of the box's
// own newest backup (Held; never what another box's backups hold): the
// magic "HBXHELD1", the committed token of that backup's part (32 bytes,
// zero for none), a count (uint64 BE) and that many 8-byte prefixes of
// chunk ids, sorted ascending with no repeat (8 MiB for a million
// chunks). A prefix stands for a chunk: a chunk whose prefix is listed is
// not sent, and should two ids share one, the host refuses the tree that
// names the chunk it lacks: never a wrong backup.
//
// The agent answers on stdout with frames, each a kind byte:
//
//	'C' a chunk: id (32), plain length (uint32 BE), stored length
//	    (uint32 BE), compression (1 byte: 0 none, 1 zstd), stored bytes
//	'P' progress: bytes of file content read so far (uint64 BE)
//	'E' the end: entries, bytes of file content, bytes read (uint64 BE
//	    each), the tree's chunk count (uint32 BE) and ids; nothing follows
//
// Every length is bounded by the reader (MaxChunk, MaxTree).
package chunkwire

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ID is a chunk's SHA-256.
type ID = [sha256.Size]byte

// Limits of the format.
const (
	// MaxChunk is the most bytes of a chunk, plain or stored: the
	// chunker's largest cut (cdc.MaxSize).
	MaxChunk = 1 << 20
	// MaxHeld is the most prefixes a Held carries (128 MiB of them).
	MaxHeld = 16 << 20
	// MaxTree is the most chunks of one part's tree: at least 256 MiB
	// of tree (every chunk but the last is 64 KiB or more), some 2.5
	// million entries of the compact tree. The record names each tree
	// chunk in 67 bytes: two parts of 4,096 take 549 KB of the 1 MiB a
	// record may have (it held 65,536, whose record could not load).
	MaxTree = 1 << 12
)

// Compression of a chunk frame.
const (
	Plain byte = 0
	Zstd  byte = 1
)

// Frame kinds.
const (
	KindChunk    byte = 'C'
	KindProgress byte = 'P'
	KindEnd      byte = 'E'
)

var heldMagic = []byte("HBXHELD1")

// ErrFormat is a stream that breaks the format.
var ErrFormat = errors.New("invalid chunk stream")

// Prefix is the first 8 bytes of id, as Held lists it.
func Prefix(id ID) uint64 { return binary.BigEndian.Uint64(id[:8]) }

// Token names a part's tree: the SHA-256 of its chunk ids in order.
func Token(tree []ID) ID {
	h := sha256.New()
	for _, id := range tree {
		h.Write(id[:])
	}
	var t ID
	copy(t[:], h.Sum(nil))
	return t
}

// Held is what the host holds.
type Held struct {
	// Committed is the Token of the part's tree in the machine's last
	// backup; zero for none.
	Committed ID
	// Prefixes are sorted, without repeats.
	Prefixes []uint64
}

// Has reports whether id's prefix is held.
func (h *Held) Has(id ID) bool {
	_, ok := slices.BinarySearch(h.Prefixes, Prefix(id))
	return ok
}

// WriteHeld writes h to w.
func WriteHeld(w io.Writer, h *Held) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(heldMagic)
	bw.Write(h.Committed[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(len(h.Prefixes)))
	bw.Write(b[:])
	for _, p := range h.Prefixes {
		binary.BigEndian.PutUint64(b[:], p)
		bw.Write(b[:])
	}
	return bw.Flush()
}

// ReadHeld reads a Held, checking its order and bounds.
func ReadHeld(r io.Reader) (*Held, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, len(heldMagic)+32+8)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, fmt.Errorf("%w: reading the held chunks: %w", ErrFormat, err)
	}
	if string(head[:len(heldMagic)]) != string(heldMagic) {
		return nil, fmt.Errorf("%w: the held chunks do not start with %q", ErrFormat, heldMagic)
	}
	h := &Held{}
	copy(h.Committed[:], head[len(heldMagic):])
	n := binary.BigEndian.Uint64(head[len(heldMagic)+32:])
	if n > MaxHeld {
		return nil, fmt.Errorf("%w: %d held chunks, over the limit of %d", ErrFormat, n, MaxHeld)
	}
	h.Prefixes = make([]uint64, 0, min(n, 1<<16)) // grown as they come
	var b [8]byte
	for i := range int(n) {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return nil, fmt.Errorf("%w: reading the held chunks: %w", ErrFormat, err)
		}
		h.Prefixes = append(h.Prefixes, binary.BigEndian.Uint64(b[:]))
		if i > 0 && h.Prefixes[i] <= h.Prefixes[i-1] {
			return nil, fmt.Errorf("%w: held chunk %d is out of order", ErrFormat, i)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes after the held chunks", ErrFormat)
	}
	return h, nil
}

// Chunk is a chunk frame.
type Chunk struct {
	ID          ID
	Plain       uint32
	Compression byte
	// Stored is the chunk as sent; valid until the next Read.
	Stored []byte
}

// End is the end frame.
type End struct {
	Entries, Bytes, Read uint64
	Tree                 []ID
}

// Writer writes frames.
type Writer struct {
	w   *bufio.Writer
	buf [64]byte
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 1<<20)} }

// Chunk writes a chunk frame.
func (w *Writer) Chunk(c Chunk) error {
	b := append(w.buf[:0], KindChunk)
	b = append(b, c.ID[:]...)
	b = binary.BigEndian.AppendUint32(b, c.Plain)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Stored)))
	b = append(b, c.Compression)
	w.w.Write(b)
	_, err := w.w.Write(c.Stored)
	return err
}

// Progress writes a progress frame and flushes.
func (w *Writer) Progress(read uint64) error {
	b := append(w.buf[:0], KindProgress)
	w.w.Write(binary.BigEndian.AppendUint64(b, read))
	return w.w.Flush()
}

// End writes the end frame and flushes.
func (w *Writer) End(e End) error {
	b := append(w.buf[:0], KindEnd)
	for _, v := range []uint64{e.Entries, e.Bytes, e.Read} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	w.w.Write(binary.BigEndian.AppendUint32(b, uint32(len(e.Tree))))
	for _, id := range e.Tree {
		w.w.Write(id[:])
	}
	return w.w.Flush()
}

// Reader reads frames.
type Reader struct {
	r     *bufio.Reader
	chunk Chunk
	buf   []byte
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 1<<20), buf: make([]byte, 0, MaxChunk)}
}

// Next reads one frame: exactly one of the results is set. After an End
// the stream must end: more bytes are an ErrFormat error.
func (r *Reader) Next() (c *Chunk, progress uint64, end *End, err error) {
	kind, err := r.r.ReadByte()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w: the stream ended without its end frame: %w", ErrFormat, err)
	}
	switch kind {
	case KindChunk:
		c, err := r.readChunk()
		return c, 0, nil, err
	case KindProgress:
		var b [8]byte
		if _, err := io.ReadFull(r.r, b[:]); err != nil {
			return nil, 0, nil, fmt.Errorf("%w: a progress frame: %w", ErrFormat, err)
		}
		return nil, binary.BigEndian.Uint64(b[:]), nil, nil
	case KindEnd:
		e, err := r.readEnd()
		return nil, 0, e, err
	}
	return nil, 0, nil, fmt.Errorf("%w: unknown frame kind %#x", ErrFormat, kind)
}

func (r *Reader) readChunk() (*Chunk, error) {
	var head [32 + 4 + 4 + 1]byte
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		return nil, fmt.Errorf("%w: a chunk frame: %w", ErrFormat, err)
	}
	c := &r.chunk
	copy(c.ID[:], head[:32])
	c.Plain = binary.BigEndian.Uint32(head[32:])
	stored := binary.BigEndian.Uint32(head[36:])
	c.Compression = head[40]
	switch {
	case c.Plain > MaxChunk || stored > MaxChunk:
		return nil, fmt.Errorf("%w: chunk %x: %d bytes stored, %d plain, over the limit of %d", ErrFormat, c.ID, stored, c.Plain, MaxChunk)
	case c.Compression != Plain && c.Compression != Zstd:
		return nil, fmt.Errorf("%w: chunk %x: unknown compression %d", ErrFormat, c.ID, c.Compression)
	case c.Compression == Plain && stored != c.Plain:
		return nil, fmt.Errorf("%w: chunk %x: %d bytes stored plain, %d long", ErrFormat, c.ID, stored, c.Plain)
	}
	c.Stored = r.buf[:stored]
	if _, err := io.ReadFull(r.r, c.Stored); err != nil {
		return nil, fmt.Errorf("%w: chunk %x: %w", ErrFormat, c.ID, err)
	}
	return c, nil
}

func (r *Reader) readEnd() (*End, error) {
	var head [3*8 + 4]byte
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		return nil, fmt.Errorf("%w: the end frame: %w", ErrFormat, err)
	}
	e := &End{Entries: binary.BigEndian.Uint64(head[:]), Bytes: binary.BigEndian.Uint64(head[8:]),
		Read: binary.BigEndian.Uint64(head[16:])}
	n := binary.BigEndian.Uint32(head[24:])
	if n > MaxTree {
		return nil, fmt.Errorf("%w: a tree of %d chunks, over the limit of %d", ErrFormat, n, MaxTree)
	}
	e.Tree = make([]ID, n)
	for i := range e.Tree {
		if _, err := io.ReadFull(r.r, e.Tree[i][:]); err != nil {
			return nil, fmt.Errorf("%w: the end frame: %w", ErrFormat, err)
		}
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes after the end frame", ErrFormat)
	}
	return e, nil
}
