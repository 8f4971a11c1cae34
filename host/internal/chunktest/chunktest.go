// Package chunktest is the agent's side of `snapshot chunks` for tests
// that build incremental backups through chunkstore.Ingest, the one way
// the product writes them: it cuts a part's tar as the agent does and
// sends the chunks the host's held list lacks.
package chunktest

import (
	"bytes"
	"context"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// Mutation changes what the agent sends: Chunk may rewrite a chunk frame
// (return it changed, or nil to leave it out), End the stream's end.
type Mutation struct {
	Chunk func(c *chunkwire.Chunk) *chunkwire.Chunk
	End   func(e *chunkwire.End)
}

// Agent streams the part named by the host from parts (each a gzip tar,
// as `snapshot write` sends it), changed by mut; sent, when set, counts
// the chunk frames it wrote. Its type is chunkstore.ChunkSource's.
func Agent(parts map[string][]byte, mut Mutation, sent *int) func(ctx context.Context, part string, held io.Reader, w io.Writer) error {
	// The box's own encoder in the host's tests' process: a chunk's
	// window (not 18 MiB of the host's heap as measured).
	zw, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(chunkwire.MaxChunk), zstd.WithLowerEncoderMem(true))
	return func(ctx context.Context, part string, in io.Reader, w io.Writer) error {
		held, err := chunkwire.ReadHeld(in)
		if err != nil {
			return err
		}
		zr, err := gzip.NewReader(bytes.NewReader(parts[part]))
		if err != nil {
			return err
		}
		fw := chunkwire.NewWriter(w)
		seen := map[chunkwire.ID]bool{}
		tree, st, err := snaptree.Encode(zr, func(id snaptree.ID, data []byte) error {
			if held.Has(id) || seen[id] {
				return nil
			}
			seen[id] = true
			c := &chunkwire.Chunk{ID: id, Plain: uint32(len(data)), Compression: chunkwire.Zstd, Stored: zw.EncodeAll(data, nil)}
			if mut.Chunk != nil {
				if c = mut.Chunk(c); c == nil {
					return nil
				}
			}
			if sent != nil {
				*sent++
			}
			return fw.Chunk(*c)
		})
		if err != nil {
			return err
		}
		end := chunkwire.End{Entries: uint64(st.Entries), Bytes: uint64(st.Bytes), Read: uint64(st.Read), Tree: tree}
		if mut.End != nil {
			mut.End(&end)
		}
		return fw.End(end)
	}
}
