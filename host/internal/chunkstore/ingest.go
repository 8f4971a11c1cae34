package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// ChunkSource runs the agent's `snapshot chunks PART`: held goes to its
// stdin, its stdout (the chunk stream) to w.
type ChunkSource func(ctx context.Context, part string, held io.Reader, w io.Writer) error

// PartProgress is what one part's stream carried so far: the bytes of
// file content the agent read (as it says), the bytes of chunks new to
// the store, and the bytes that crossed the relay.
type PartProgress struct {
	Part            string
	Read, New, Sent int64
	// Done is set on the part's last report.
	Done bool
}

// Ingest writes an incremental backup below backupsDir from the agent's
// chunk streams: for each part, it tells the agent which chunks the
// machine's store holds, receives only the others, re-hashes each one
// (bounded in size and decompression), and checks the part's tree: every
// chunk it names held or received, every entry within today's rules and
// meta.Limits. Then it commits as Snapshot does. report, when set, is
// told of each part's progress. The caller holds the operation lock.
func Ingest(ctx context.Context, backupsDir string, meta backup.Meta, src ChunkSource, report func(PartProgress)) (dir string, rec *Record, err error) {
	if report == nil {
		report = func(PartProgress) {}
	}
	tokens := committedTokens(backupsDir, meta)
	return build(ctx, backupsDir, meta, func(s *Store, w *Writer, part string) (PartRecord, []string, error) {
		in := &ingester{s: s, w: w, part: part, lim: meta.Limits, dir: backupsDir, report: report}
		return in.run(ctx, src, tokens[part])
	})
}

// committedTokens are the tokens of the parts of the machine's newest
// incremental backup, which the agent's cache is keyed by; none when
// there is none or the backups do not load (the agent then reads every
// file, and still sends only what the store lacks).
func committedTokens(backupsDir string, meta backup.Meta) map[string]chunkwire.ID {
	out := map[string]chunkwire.ID{}
	_, recs, err := Backups(backupsDir, meta.Machine, backup.Trust{Key: meta.Signer.PublicKey()})
	if err != nil || len(recs) == 0 {
		return out
	}
	newest := slices.MaxFunc(recs, func(a, b *Record) int { return cmpCreated(a.Created, b.Created) })
	for part, p := range newest.Parts {
		ids, err := p.treeIDs()
		if err != nil {
			continue
		}
		tree := make([]chunkwire.ID, len(ids))
		for i, id := range ids {
			tree[i] = id
		}
		out[part] = chunkwire.Token(tree)
	}
	return out
}

func cmpCreated(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ingester receives one part.
type ingester struct {
	s      *Store
	w      *Writer
	part   string
	lim    backup.Limits
	dir    string
	report func(PartProgress)
	prog   PartProgress
}

// run streams the part from src and checks its tree; it returns the
// part's record and listing.
func (in *ingester) run(ctx context.Context, src ChunkSource, committed chunkwire.ID) (PartRecord, []string, error) {
	prefixes := in.s.prefixes()
	var held bytes.Buffer
	held.Grow(64 + 8*len(prefixes)) // 8 MiB for a million chunks, allocated once
	if err := chunkwire.WriteHeld(&held, &chunkwire.Held{Committed: committed, Prefixes: prefixes}); err != nil {
		return PartRecord{}, nil, err
	}
	in.prog = PartProgress{Part: in.part}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	srcErr := make(chan error, 1)
	go func() {
		err := src(ctx, in.part, &held, in.lim.Guard(pw, in.dir, in.part))
		pw.CloseWithError(err)
		srcErr <- err
	}()
	end, err := in.receive(&countingReader{r: pr, n: &in.prog.Sent})
	pr.CloseWithError(errors.Join(err, errors.New("the snapshot stopped reading")))
	if err != nil {
		cancel()
	}
	if serr := <-srcErr; err == nil && serr != nil {
		err = serr
	} else if err != nil && serr != nil && !errors.Is(serr, io.ErrClosedPipe) {
		err = fmt.Errorf("%w (the agent: %w)", err, serr)
	}
	if err != nil {
		return PartRecord{}, nil, err
	}
	crashPoint("part-received")
	// The tree is read back from the store: publish the open pack first.
	if err := in.w.flush(); err != nil {
		return PartRecord{}, nil, err
	}
	p, names, err := in.s.checkTree(ctx, end.Tree, in.lim)
	if err != nil {
		return PartRecord{}, nil, err
	}
	in.prog.Done = true
	in.report(in.prog)
	return p, names, nil
}

// receive reads the frames up to the end frame, adding each chunk.
func (in *ingester) receive(r io.Reader) (*chunkwire.End, error) {
	fr := chunkwire.NewReader(r)
	buf := make([]byte, 0, MaxChunk)
	for {
		c, read, end, err := fr.Next()
		switch {
		case err != nil:
			return nil, err
		case end != nil:
			in.prog.Read = int64(end.Read)
			return end, nil
		case c == nil:
			in.prog.Read = int64(read)
			in.report(in.prog)
			continue
		}
		data, err := in.plain(c, buf)
		if err != nil {
			return nil, err
		}
		var packed []byte // the agent's zstd frame is stored as it came
		if c.Compression == chunkwire.Zstd {
			packed = c.Stored
		}
		added, err := in.w.PutStored(c.ID, data, packed)
		if err != nil {
			return nil, err
		}
		if added {
			in.prog.New += int64(len(data))
		}
	}
}

// plain is a chunk frame's plaintext, decompressed within its stated
// length (which Put checks against the hash).
func (in *ingester) plain(c *chunkwire.Chunk, buf []byte) ([]byte, error) {
	if c.Compression == chunkwire.Plain {
		return c.Stored, nil
	}
	data, err := in.s.dec.DecodeAll(c.Stored, buf[:0:c.Plain])
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %s does not decompress within its %d bytes: %w", ErrCorrupt, ID(c.ID), c.Plain, err)
	}
	if len(data) != int(c.Plain) {
		return nil, fmt.Errorf("%w: chunk %s decompresses to %d bytes, not its %d", ErrCorrupt, ID(c.ID), len(data), c.Plain)
	}
	return data, nil
}

// checkTree decodes a part's tree (its chunks read and re-hashed), checks
// that every file chunk it names is held, and lists it within lim: the
// names, entries and unpacked size that a v2 snapshot's listing bounds.
func (s *Store) checkTree(ctx context.Context, tree []chunkwire.ID, lim backup.Limits) (PartRecord, []string, error) {
	p := PartRecord{Tree: make([]string, len(tree))}
	ids := make([]snaptree.ID, len(tree))
	for i, id := range tree {
		if !s.Has(ID(id)) {
			return PartRecord{}, nil, fmt.Errorf("%w: tree chunk %s is neither held nor sent", ErrMissing, ID(id))
		}
		ids[i], p.Tree[i] = id, ID(id).String()
	}
	buf := make([]byte, 0, MaxChunk)
	readTree := func(id snaptree.ID) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := s.Read(ID(id), buf)
		if errors.Is(err, ErrMissing) {
			return nil, fmt.Errorf("%w: tree chunk %s is neither held nor sent", ErrMissing, ID(id))
		}
		buf = b[:0]
		return b, err
	}
	held := func(id snaptree.ID) ([]byte, error) {
		n, ok := s.RawSize(ID(id))
		if !ok {
			return nil, fmt.Errorf("%w: chunk %s is neither held nor sent", ErrMissing, ID(id))
		}
		p.Bytes += n
		return zeros[:n], nil
	}
	pr, pw := io.Pipe()
	decoded := make(chan struct{})
	go func() {
		defer close(decoded)
		pw.CloseWithError(snaptree.Decode(snaptree.Reader(ids, readTree), held, pw))
	}()
	names, err := lim.ListTar(ctx, pr)
	if err == nil {
		_, err = io.Copy(io.Discard, pr) // the decoder's errors come at the end
	}
	pr.CloseWithError(err)
	<-decoded // the decoder reads the store: it ends before the store changes
	if err != nil {
		return PartRecord{}, nil, fmt.Errorf("checking the tree: %w", err)
	}
	p.Entries = int64(len(names))
	return p, names, nil
}

// prefixes are the chunkwire prefixes of every chunk held, sorted,
// without repeats.
func (s *Store) prefixes() []uint64 {
	s.idx.merge()
	out := make([]uint64, 0, len(s.idx.entries))
	for _, e := range s.idx.entries {
		p := chunkwire.Prefix(e.id)
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// countingReader counts the bytes read through it into n.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}
