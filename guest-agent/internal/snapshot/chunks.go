package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// progressEvery is how many bytes of content are read between progress
// frames.
const progressEvery = 16 << 20

// ChunkOptions configure Chunks.
type ChunkOptions struct {
	// Part names the part (its cache's name).
	Part string
	// CacheDir holds the chunk caches (boxlayout.ChunkCache in the box).
	CacheDir string
}

// Chunks is the agent's side of an incremental snapshot part: it reads
// what the host holds (chunkwire.Held) from in, walks spec as Write does,
// cuts every file it reads into chunks (shared/cdc through snaptree), and
// writes on out only the chunks the host lacks, then the end frame with
// the tree. A file whose identity and times match the committed cache,
// with every chunk held, is not read. The new cache is written last.
func Chunks(ctx context.Context, in io.Reader, out io.Writer, spec Spec, opt ChunkOptions) error {
	held, err := chunkwire.ReadHeld(in)
	if err != nil {
		return err
	}
	prev := loadCache(opt.CacheDir, opt.Part, held.Committed)
	s, err := newChunkSender(out, held)
	if err != nil {
		return err
	}
	defer s.zw.Close()
	next := cache{}
	enc := snaptree.NewEncoder(s.send)
	known := func(hdr *tar.Header, fi os.FileInfo) (bool, error) {
		e, ok := prev[hdr.Name]
		if !ok || e.Key != keyOf(fi) || !s.allHeld(e.IDs) {
			s.pending = keyOf(fi)
			return false, nil
		}
		next[hdr.Name] = e
		return true, enc.WriteKnown(hdr, e.IDs)
	}
	enc.OnFile = func(hdr *tar.Header, ids []byte) {
		if hdr.Size > 0 {
			next[hdr.Name] = cacheEntry{Name: hdr.Name, Key: s.pending, IDs: append([]byte(nil), ids...)}
		}
	}
	if err := tarfs.Walk(ctx, &progressEntries{Encoder: enc, s: s}, spec.Dir, tarfs.WriteOptions{Exclude: spec.Exclude, Known: known}); err != nil {
		return err
	}
	tree, st, err := enc.Close()
	if err != nil {
		return err
	}
	if err := s.fw.End(chunkwire.End{Entries: uint64(st.Entries), Bytes: uint64(st.Bytes), Read: uint64(st.Read), Tree: tree}); err != nil {
		return fmt.Errorf("sending the end of %s: %w", opt.Part, err)
	}
	return saveCache(opt.CacheDir, opt.Part, chunkwire.Token(tree), held.Committed, next)
}

// chunkSender sends each chunk the host lacks once, compressed when that
// makes it smaller.
type chunkSender struct {
	fw      *chunkwire.Writer
	held    *chunkwire.Held
	sent    map[chunkwire.ID]bool
	zw      *zstd.Encoder
	buf     []byte
	pending fileKey // the identity of the file being read
	read    int64   // content bytes read
	next    int64   // when the next progress frame is due
}

func newChunkSender(out io.Writer, held *chunkwire.Held) (*chunkSender, error) {
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("starting zstd: %w", err)
	}
	return &chunkSender{fw: chunkwire.NewWriter(out), held: held, sent: map[chunkwire.ID]bool{}, zw: zw, next: progressEvery}, nil
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
	c := chunkwire.Chunk{ID: id, Plain: uint32(len(data)), Compression: chunkwire.Plain, Stored: data}
	if s.buf = s.zw.EncodeAll(data, s.buf[:0]); len(s.buf) < len(data) {
		c.Compression, c.Stored = chunkwire.Zstd, s.buf
	}
	if err := s.fw.Chunk(c); err != nil {
		return fmt.Errorf("sending chunk %x: %w", id, err)
	}
	return nil
}

// progressEntries counts the content read and sends a progress frame
// every progressEvery bytes.
type progressEntries struct {
	*snaptree.Encoder
	s *chunkSender
}

func (p *progressEntries) Write(b []byte) (int, error) {
	n, err := p.Encoder.Write(b)
	if p.s.read += int64(n); p.s.read >= p.s.next {
		p.s.next = p.s.read + progressEvery
		if perr := p.s.fw.Progress(uint64(p.s.read)); err == nil {
			err = perr
		}
	}
	return n, err
}
