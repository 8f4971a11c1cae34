// Package cdc cuts a byte stream into content-defined chunks with FastCDC
// (Xia et al., 2016: a gear rolling hash, normalized chunking with a harder
// mask before the average size and an easier one after). The same content
// yields the same cut points wherever it sits in a stream, so an insertion
// changes only the chunks around it.
//
// The gear table, the masks and the sizes are frozen: a chunk's identity in
// every store depends on them, and the golden test fails on any change.
// Name identifies this exact chunker in records.
package cdc

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
)

// Name is the frozen name of this chunker and its parameters.
const Name = "fastcdc-gear-sha256-v1-64k-256k-1m"

// The chunk sizes: no chunk but a stream's last is shorter than MinSize,
// none is longer than MaxSize, and cuts average near AvgSize.
const (
	MinSize = 64 << 10
	AvgSize = 256 << 10
	MaxSize = 1 << 20
)

// The masks test the top bits of the gear hash (the low bits depend on the
// last few bytes only): two bits harder before AvgSize, two easier after.
const (
	avgBits = 18 // log2(AvgSize)
	maskS   = uint64(1<<(avgBits+2)-1) << (64 - (avgBits + 2))
	maskL   = uint64(1<<(avgBits-2)-1) << (64 - (avgBits - 2))
)

// gear is the rolling hash's table: entry i is the first eight bytes of
// SHA-256("hermes-box cdc gear" || i), big-endian.
var gear = func() (g [256]uint64) {
	for i := range g {
		sum := sha256.Sum256(append([]byte("hermes-box cdc gear"), byte(i)))
		g[i] = binary.BigEndian.Uint64(sum[:8])
	}
	return g
}()

// Cut returns the length of the first chunk of data, which is the start
// of a stream or what follows a previous cut. When data is shorter than
// MaxSize and the stream has more, the caller must supply more first:
// Cut of a short buffer is only final at the end of the stream.
func Cut(data []byte) int {
	n := len(data)
	if n <= MinSize {
		return n
	}
	if n > MaxSize {
		n = MaxSize
	}
	normal := min(AvgSize, n)
	var fp uint64
	i := MinSize
	for ; i < normal; i++ {
		fp = fp<<1 + gear[data[i]]
		if fp&maskS == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		fp = fp<<1 + gear[data[i]]
		if fp&maskL == 0 {
			return i + 1
		}
	}
	return n
}

// Chunker reads a stream and returns its chunks in order.
type Chunker struct {
	r    io.Reader
	buf  []byte
	head int // start of unreturned data in buf
	tail int // end of data in buf
	eof  bool
}

// New returns a Chunker reading r; it holds 2 × MaxSize of memory.
func New(r io.Reader) *Chunker {
	return &Chunker{r: r, buf: make([]byte, 2*MaxSize)}
}

// Reset makes c read r from its start, keeping its buffer.
func (c *Chunker) Reset(r io.Reader) {
	c.r, c.head, c.tail, c.eof = r, 0, 0, false
}

// Next returns the next chunk, valid until the next call, and io.EOF
// after the last one. A stream that is empty has no chunk.
func (c *Chunker) Next() ([]byte, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	if c.head == c.tail {
		return nil, io.EOF
	}
	n := Cut(c.buf[c.head:c.tail])
	chunk := c.buf[c.head : c.head+n]
	c.head += n
	return chunk, nil
}

// fill reads until MaxSize bytes are buffered past head or the stream ends.
func (c *Chunker) fill() error {
	if c.tail-c.head >= MaxSize || c.eof {
		return nil
	}
	if c.head > 0 {
		c.tail = copy(c.buf, c.buf[c.head:c.tail])
		c.head = 0
	}
	for c.tail < MaxSize && !c.eof {
		n, err := c.r.Read(c.buf[c.tail:])
		c.tail += n
		if errors.Is(err, io.EOF) {
			c.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Writer cuts what is written to it into chunks and passes each to emit,
// in order: the same cuts a Chunker makes of the same stream.
type Writer struct {
	buf  []byte
	emit func([]byte) error
}

// NewWriter returns a Writer calling emit with each chunk; the chunk is
// valid only during the call.
func NewWriter(emit func([]byte) error) *Writer {
	return &Writer{buf: make([]byte, 0, 2*MaxSize), emit: emit}
}

// Write buffers p and emits every chunk that is final.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(len(p), cap(w.buf)-len(w.buf))
		w.buf, p = append(w.buf, p[:take]...), p[take:]
		if err := w.cut(MaxSize); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// Close emits what remains: the stream's last chunks.
func (w *Writer) Close() error { return w.cut(1) }

// cut emits chunks while at least keep bytes are buffered.
func (w *Writer) cut(keep int) error {
	head := 0
	for len(w.buf)-head >= keep && len(w.buf) > head {
		n := Cut(w.buf[head:])
		if err := w.emit(w.buf[head : head+n]); err != nil {
			return err
		}
		head += n
	}
	w.buf = w.buf[:copy(w.buf, w.buf[head:])]
	return nil
}
