package snapshot

import (
	"fmt"
	"io"
	"math"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/ordered"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// maxCompressors bounds the goroutines compressing chunks.
const maxCompressors = 8

// chunkSender sends each chunk the host lacks once, compressed when that
// makes it smaller. The walk hands it chunks in order (send); compressors
// on every core compress them; one goroutine writes the frames in the
// order they were handed over. A fixed set of frames bounds the memory:
// about 2 MiB each, 2 × compressors + 2 of them.
type chunkSender struct {
	held *chunkwire.Held
	fw   *chunkwire.Writer // the pipeline's writer's until it has ended
	sent map[chunkwire.ID]bool
	zw   *zstd.Encoder
	p    *ordered.Pipeline[frame]
	// closed is set once close has run.
	closed bool

	pending fileKey // the identity of the file being read
	read    int64   // content bytes read
	next    int64   // when the next progress frame is due
}

// frame is one chunk or progress frame on its way to the writer.
type frame struct {
	progress bool
	read     uint64 // a progress frame's bytes read
	chunk    chunkwire.Chunk
	data     []byte // the chunk's plaintext (a copy)
	packed   []byte // its zstd frame
}

func newChunkSender(out io.Writer, held *chunkwire.Held) (*chunkSender, error) {
	n := min(runtime.GOMAXPROCS(0), maxCompressors)
	// The fastest level: the store keeps the frames as sent, and the
	// default level saves 2% of the bytes for 25% more time.
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(n), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("starting zstd: %w", err)
	}
	s := &chunkSender{held: held, fw: chunkwire.NewWriter(out), sent: map[chunkwire.ID]bool{}, zw: zw, next: progressEvery}
	s.p = ordered.New(n, 2*n+2, s.compress, s.write)
	return s, nil
}

func (s *chunkSender) allHeld(ids []byte) bool {
	var id chunkwire.ID
	for len(ids) >= len(id) {
		copy(id[:], ids)
		if !s.held.Has(id) {
			return false
		}
		ids = ids[len(id):]
	}
	return len(ids) == 0
}

// send is the encoder's sink: a chunk the host holds, or that this stream
// sent already, is not sent again.
func (s *chunkSender) send(id snaptree.ID, data []byte) error {
	if s.held.Has(id) || s.sent[id] {
		return nil
	}
	s.sent[id] = true
	f, err := s.p.Take()
	if err != nil {
		return err
	}
	f.V.progress = false
	f.V.data = append(f.V.data[:0], data...)
	f.V.chunk = chunkwire.Chunk{ID: id, Plain: uint32(len(data))}
	s.p.Put(f, true)
	return nil
}

// progress queues a progress frame after the chunks sent so far.
func (s *chunkSender) progress(read int64) error {
	f, err := s.p.Take()
	if err != nil {
		return err
	}
	f.V.progress, f.V.read = true, uint64(read)
	s.p.Put(f, false)
	return nil
}

// compress sets a frame's stored form: its zstd frame when that is
// smaller, its plaintext otherwise or when it does not look compressible.
func (s *chunkSender) compress(f *frame) {
	f.chunk.Compression, f.chunk.Stored = chunkwire.Plain, f.data
	if compressible(f.data) {
		if f.packed = s.zw.EncodeAll(f.data, f.packed[:0]); len(f.packed) < len(f.data) {
			f.chunk.Compression, f.chunk.Stored = chunkwire.Zstd, f.packed
		}
	}
}

// write writes a frame, in order.
func (s *chunkSender) write(f *frame) error {
	if f.progress {
		return s.fw.Progress(f.read)
	}
	if err := s.fw.Chunk(f.chunk); err != nil {
		return fmt.Errorf("sending chunk %x: %w", f.chunk.ID, err)
	}
	return nil
}

// end waits for every frame sent to be written, then writes the end
// frame with the tree.
func (s *chunkSender) end(e chunkwire.End) error {
	if err := s.close(); err != nil {
		return err
	}
	return s.fw.End(e)
}

// close waits for every frame queued to be written, stops the pipeline
// and returns its error. Later calls do nothing.
func (s *chunkSender) close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.p.Close()
	s.zw.Close()
	return err
}

// Probing a chunk: probeWindows windows of probeWindow bytes spread over
// it. A window of random bytes has an entropy of about 7.6 bits a byte
// by this estimate; text and code sit well below randomEntropy.
const (
	probeWindows  = 16
	probeWindow   = 512
	randomEntropy = 7.2
)

// entropyTerms[c] is c × log2(c), for the entropy of a window's histogram.
var entropyTerms = func() (t [probeWindow + 1]float64) {
	for c := 1; c <= probeWindow; c++ {
		t[c] = float64(c) * math.Log2(float64(c))
	}
	return t
}()

// compressible is a cheap guess at whether zstd shrinks data: false when
// every probe window looks random (the bytes' entropy near 8 bits), as
// compressed or encrypted content does. Mixed content is compressed.
func compressible(data []byte) bool {
	if len(data) < 2*probeWindows*probeWindow {
		return true
	}
	step := len(data) / probeWindows
	for i := range probeWindows {
		var hist [256]uint16
		for _, b := range data[i*step : i*step+probeWindow] {
			hist[b]++
		}
		var sum float64
		for _, c := range hist {
			sum += entropyTerms[c]
		}
		if math.Log2(probeWindow)-sum/probeWindow < randomEntropy {
			return true
		}
	}
	return false
}
