package chunkstore

import (
	"fmt"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/ordered"
)

// maxVerifiers bounds the goroutines decompressing and re-hashing the
// chunks a stream brings.
const maxVerifiers = 4

// newDecoder is a zstd decoder for n goroutines at once, bounded for
// chunks: its DecodeAll never grows past the capacity it is given.
func newDecoder(n int) (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(n),
		zstd.WithDecoderMaxMemory(4*MaxChunk), zstd.WithDecodeAllCapLimit(true))
}

// verifier checks the chunks of one stream on several goroutines and
// adds them to the store in the order they came: the stream's reader
// hands each frame over (chunk, progress), verifiers decompress and
// re-hash it, and one committer puts it into the pack. A fixed set of
// slots (2 MiB each at most) bounds the memory.
type verifier struct {
	in  *ingester
	dec *zstd.Decoder
	p   *ordered.Pipeline[slot]
}

// slot is one frame on its way to the store.
type slot struct {
	progress bool
	read     int64 // a progress frame's bytes read
	id       ID
	plain    uint32
	zstd     bool
	stored   []byte // the frame's bytes (a copy)
	buf      []byte // room for the plaintext of a compressed chunk
	data     []byte // the plaintext, once verified (stored or buf)
	err      error
}

func newVerifier(in *ingester) (*verifier, error) {
	n := min(runtime.GOMAXPROCS(0), maxVerifiers)
	dec, err := newDecoder(n)
	if err != nil {
		return nil, fmt.Errorf("starting zstd: %w", err)
	}
	v := &verifier{in: in, dec: dec}
	v.p = ordered.New(n, 2*n+2, v.verify, v.commit)
	return v, nil
}

// chunk hands a chunk frame over; it fails once the committer has.
func (v *verifier) chunk(c *chunkwire.Chunk) error {
	s, err := v.p.Take()
	if err != nil {
		return err
	}
	s.V.progress, s.V.id, s.V.plain, s.V.zstd = false, ID(c.ID), c.Plain, c.Compression == chunkwire.Zstd
	s.V.stored = append(s.V.stored[:0], c.Stored...)
	v.p.Put(s, true)
	return nil
}

// progress hands a progress frame over, in order with the chunks.
func (v *verifier) progress(read int64) error {
	s, err := v.p.Take()
	if err != nil {
		return err
	}
	s.V.progress, s.V.read = true, read
	v.p.Put(s, false)
	return nil
}

// verify decompresses a chunk within its stated length and re-hashes it
// (unpack); the committer refuses one that fails.
func (v *verifier) verify(s *slot) {
	if s.zstd && cap(s.buf) < int(s.plain) {
		s.buf = make([]byte, 0, MaxChunk)
	}
	s.data, s.err = unpack(v.dec, s.id, s.stored, s.zstd, s.plain, s.buf)
}

// commit adds a verified chunk to the store, or reports a progress
// frame, in order.
func (v *verifier) commit(s *slot) error {
	in := v.in
	switch {
	case s.progress:
		in.prog.Read, in.prog.Sent = s.read, in.sent.Load()
		in.report(in.prog)
		return nil
	case s.err != nil:
		return s.err
	}
	return in.add(s)
}

// close waits for every frame handed over to be committed and returns
// the first error.
func (v *verifier) close() error {
	err := v.p.Close()
	v.dec.Close()
	return err
}
