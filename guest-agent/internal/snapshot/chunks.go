package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"

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
	defer s.close()
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
	if err := s.end(chunkwire.End{Entries: uint64(st.Entries), Bytes: uint64(st.Bytes), Read: uint64(st.Read), Tree: tree}); err != nil {
		return fmt.Errorf("sending the end of %s: %w", opt.Part, err)
	}
	return saveCache(opt.CacheDir, opt.Part, chunkwire.Token(tree), held.Committed, next)
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
		if perr := p.s.progress(p.s.read); err == nil {
			err = perr
		}
	}
	return n, err
}
