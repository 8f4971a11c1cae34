package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
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
// chunk streams: for each part, it tells the agent which chunks of the
// box's own newest backup the store holds (held.go), receives only the
// others, re-hashes each one (bounded in size and decompression), and
// checks the part's tree: every chunk it names held or received, every
// chunk received named by it, every entry within today's rules,
// meta.Limits and StreamLimits, all checked as the stream runs. Then it
// commits as Snapshot does; a refused part commits nothing. report, when set, is
// told of each part's progress. The caller holds the operation lock.
func Ingest(ctx context.Context, backupsDir string, meta backup.Meta, src ChunkSource, report func(PartProgress)) (dir string, rec *Record, err error) {
	if report == nil {
		report = func(PartProgress) {}
	}
	known := knownBackup(backupsDir, meta)
	tokens := committedTokens(known)
	var held []uint64
	heldOnce := false
	dir, rec, err = build(ctx, backupsDir, meta, func(s *Store, w *Writer, part string) (PartRecord, []string, error) {
		if !heldOnce {
			// An error leaves the list empty: the box sends every chunk.
			held, _ = s.heldPrefixes(ctx, known)
			heldOnce = true
		}
		in := &ingester{s: s, w: w, part: part, lim: meta.Limits, dir: backupsDir, report: report, fresh: &freshChunks{}}
		return in.run(ctx, src, tokens[part], held)
	})
	if err == nil {
		_ = noteBox(backupsDir, meta, rec) // best effort: see noteBox
	}
	return dir, rec, err
}

// committedTokens are the tokens of the parts of known, the box's newest
// incremental backup, which the agent's cache is keyed by; none when
// there is none (the agent then reads every file, and still sends only
// what the store lacks).
func committedTokens(known *Record) map[string]chunkwire.ID {
	out := map[string]chunkwire.ID{}
	if known == nil {
		return out
	}
	for part, p := range known.Parts {
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
	prog   PartProgress // the committer's (verifier) while the stream runs
	sent   atomic.Int64 // bytes read from the stream
	// fresh are the chunks this part added to the store, each kept only
	// if the part's tree names it; small counts those under
	// snaptree.MinChunk. Both are bounded by the stream's table
	// (smallChunks, partChunks), and the store with them by
	// maxStoreChunks.
	fresh *freshChunks
	small int64
}

// run streams the part from src and checks its tree; it returns the
// part's record and listing.
func (in *ingester) run(ctx context.Context, src ChunkSource, committed chunkwire.ID, prefixes []uint64) (PartRecord, []string, error) {
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
	end, err := in.receive(&countingReader{r: pr, n: &in.sent})
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
	if err := in.s.checkTreeChunks(end.Tree); err != nil {
		return PartRecord{}, nil, err
	}
	in.fresh.sort()
	// Only the names the workspace's check reads are kept: a tree of a
	// million entries costs no million names on the host.
	keep := func(string) bool { return false }
	if in.part == boxlayout.PartWorkspace {
		keep = backup.WorkspaceNames()
	}
	p, names, err := in.s.checkTree(ctx, end.Tree, in.lim, treeChecks{named: in.fresh.name, text: in.s.treeTextBudget(end.Tree), keep: keep})
	if err != nil {
		return PartRecord{}, nil, err
	}
	if err := in.fresh.allNamed(); err != nil {
		return PartRecord{}, nil, err
	}
	in.prog.Done, in.prog.Sent = true, in.sent.Load()
	in.report(in.prog)
	return p, names, nil
}

// receive reads the frames up to the end frame, adding each chunk once
// it is verified (verifier).
func (in *ingester) receive(r io.Reader) (*chunkwire.End, error) {
	v, err := newVerifier(in)
	if err != nil {
		return nil, err
	}
	end, err := in.frames(chunkwire.NewReader(r), v)
	if cerr := v.close(); err == nil {
		err = cerr
	}
	if errors.Is(err, ErrCorrupt) {
		// A chunk as the box sent it (unpack's check): the box's fault,
		// not the store's.
		err = fmt.Errorf("%w: %s", ErrStream, strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": "))
	}
	if err != nil {
		return nil, err
	}
	in.prog.Read = int64(end.Read)
	return end, nil
}

// frames hands the stream's frames to v up to the end frame.
func (in *ingester) frames(fr *chunkwire.Reader, v *verifier) (*chunkwire.End, error) {
	for {
		c, read, end, err := fr.Next()
		switch {
		case err != nil:
			return nil, err
		case end != nil:
			return end, nil
		case c == nil:
			err = v.progress(int64(read))
		default:
			err = v.chunk(c)
		}
		if err != nil {
			return nil, err
		}
	}
}

// add puts a verified chunk into the store, as it came.
func (in *ingester) add(s *slot) error {
	var packed []byte
	if s.zstd {
		packed = s.stored
	}
	added, err := in.w.addVerified(s.id, s.data, packed)
	if err != nil || !added {
		return err
	}
	in.prog.New += int64(len(s.data))
	if len(s.data) < snaptree.MinChunk {
		if in.small++; in.small > smallChunks(in.lim) {
			return fmt.Errorf("%w: more than %d new chunks under %d bytes (a file's last chunk each, and the tree's)", ErrStream, smallChunks(in.lim), snaptree.MinChunk)
		}
	}
	if err := checkStoreChunks(in.s); err != nil {
		return err
	}
	if max := partChunks(in.lim); int64(len(in.fresh.keys)) >= max {
		return fmt.Errorf("%w: more than %d new chunks in one part", ErrStream, max)
	}
	in.fresh.add(s.id)
	return nil
}

// checkTree decodes a part's tree (its chunks read and re-hashed), checks
// that every file chunk it names is held, and lists it within lim: the
// names, entries and unpacked size that a v2 snapshot's listing bounds.
// Names and link targets must be text (no control character).
func (s *Store) checkTree(ctx context.Context, tree []chunkwire.ID, lim backup.Limits, c treeChecks) (PartRecord, []string, error) {
	named := c.named
	if named == nil {
		named = func(ID) {}
	}
	p := PartRecord{Tree: make([]string, len(tree))}
	ids := make([]snaptree.ID, len(tree))
	for i, id := range tree {
		if !s.Has(ID(id)) {
			return PartRecord{}, nil, fmt.Errorf("%w: tree chunk %s is neither held nor sent", ErrStream, ID(id))
		}
		named(ID(id))
		ids[i], p.Tree[i] = id, ID(id).String()
	}
	sizeOf := func(id snaptree.ID) (int64, error) {
		n, ok := s.RawSize(ID(id))
		if !ok {
			return 0, fmt.Errorf("%w: chunk %s is neither held nor sent", ErrStream, ID(id))
		}
		named(ID(id))
		return n, nil
	}
	// The tree's entries are listed from their headers; a file's chunks
	// are checked by their sizes in the index, none read.
	ls := lim.HeaderLister()
	ls.Keep(c.keep)
	err := snaptree.Entries(s.treeReader(ctx, ids), func(e snaptree.Entry) error {
		if err := textNames(e.Header); err != nil {
			return err
		}
		if err := c.text.add(e.Header); err != nil {
			return err
		}
		if err := ls.Add(e.Header); err != nil {
			return err
		}
		p.Bytes += e.Header.Size
		return e.Chunks(sizeOf, nil)
	})
	if err != nil {
		return PartRecord{}, nil, fmt.Errorf("checking the tree: %w", err)
	}
	p.Entries = ls.Entries()
	return p, ls.Names(), nil
}

// treeChecks are checkTree's checks at ingest: named, when set, is
// called with every chunk the tree names, its own included; text, when
// set, bounds its names and PAX records.
type treeChecks struct {
	named func(ID)
	text  *treeText
	keep  func(name string) bool // the names returned; nil: every one
}

// countingReader counts the bytes read through it into n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
