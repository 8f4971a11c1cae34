//go:build !hbxrelease

// Package chunkwiretest writes the chunk streams of `snapshot chunks` a
// compromised box would send: one just over each bound of the host's
// stream table (host/internal/chunkstore's StreamLimits) that a single
// snapshot can reach at small cost. The compromised test agent
// (tests/testagent) sends them to the release hermes-box
// (host/internal/releasematrix), and chunkstore's tests run the same
// streams through Ingest, so both see the same bytes.
package chunkwiretest

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/hermes-box/hermes-box/shared/cdc"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
	"github.com/hermes-box/hermes-box/shared/snaptree"
)

// Case is one hostile stream: Limit is the StreamLimits key it is just
// over ("" for a stream within the limits), Want what the host's refusal
// says.
type Case struct {
	Name  string
	Limit string
	Want  string
	Run   func(b *Box) error
}

// Cases are the streams, by name.
var Cases = []Case{
	{"chunk-over", "chunk-bytes", "over the limit of 1048576", func(b *Box) error {
		big := make([]byte, chunkwire.MaxChunk+1)
		if err := b.Chunk(chunkwire.Chunk{ID: sha256.Sum256(big), Plain: uint32(len(big)), Stored: big}); err != nil {
			return err
		}
		return b.End()
	}},
	{"chunk-short", "chunk-min", "short of the 65536", func(b *Box) error {
		return b.FileOf("f", 2*snaptree.MinChunk, b.Send(Content(snaptree.MinChunk-1, 0)), b.Send(Content(snaptree.MinChunk+1, 1)))
	}},
	{"chunk-empty", "chunk-empty", "chunk 0 is empty", func(b *Box) error {
		big := b.Send(Content(snaptree.MinChunk, 0))
		return b.FileOf("f", 2*snaptree.MinChunk, b.Send(nil), big, big)
	}},
	{"file-ids", "file-ids", "2 chunks for 10 bytes, over the limit of 1", func(b *Box) error {
		c := b.Send(Content(10, 0))
		return b.FileOf("f", 10, c, c)
	}},
	{"tree-chunks", "tree-chunks", "a tree of 4097 chunks", func(b *Box) error {
		tree, err := b.Cut()
		if err != nil {
			return err
		}
		return b.EndWith(Repeat(tree[0], chunkwire.MaxTree+1))
	}},
	{"tree-repeat", "tree-repeat", "more than 64 times", func(b *Box) error {
		pad := b.Send(Content(snaptree.MinChunk, 1<<30))
		tree, err := b.Cut()
		if err != nil {
			return err
		}
		return b.EndWith(append(Repeat(pad, 65), tree...))
	}},
	{"record-over", "record-bytes", "over the limit of 327680", func(b *Box) error {
		b.Raw(binary.AppendUvarint(nil, snaptree.MaxRecord+1))
		b.Raw(make([]byte, snaptree.MaxRecord+1))
		return b.End()
	}},
	{"pax-records", "pax-records", "257 PAX records", func(b *Box) error {
		b.Entry('5', "d/", 0, PAX(snaptree.MaxPAXRecords+1, 1), 0)
		return b.End()
	}},
	{"pax-bytes", "pax-bytes", "over the limit of 262144", func(b *Box) error {
		b.Entry('5', "d/", 0, PAX(1, snaptree.MaxPAXBytes+1-len(PAX(1, 0)[0][0])), 0)
		return b.End()
	}},
	{"unnamed-chunk", "part-chunks", "1 chunks sent that the tree does not name", func(b *Box) error {
		b.Send(Content(100, 7))
		b.Entry('5', "etc/", 0, nil, 0)
		return b.End()
	}},
	{"osc52-name", "names", "a control character", func(b *Box) error {
		b.Entry('5', "evil\x1b]52;c;aGVsbG8=\x07/", 0, nil, 0)
		return b.End()
	}},
	{"within", "", "", func(b *Box) error {
		b.Entry('5', "etc/", 0, nil, 0)
		return b.FileOf("etc/hostname", 4, b.Send([]byte("box\n")))
	}},
}

// Find is the case named name.
func Find(name string) (Case, bool) {
	for _, c := range Cases {
		if c.Name == name {
			return c, true
		}
	}
	return Case{}, false
}

// Write reads the host's held list from in and writes case c's stream
// to w.
func Write(c Case, in io.Reader, w io.Writer) error {
	held, err := chunkwire.ReadHeld(in)
	if err != nil {
		return err
	}
	return c.Run(NewBox(held, w))
}

// Box writes a part's stream as a compromised box would: chunks it
// chooses, a tree of records it writes byte by byte, an end frame.
type Box struct {
	// Compress, when set, is a chunk's zstd frame: Send sends chunks
	// compressed (shared/ links only the standard library: no zstd
	// here, so they are plain by default).
	Compress func([]byte) []byte
	// Every, when set before the first entry, cuts the tree every so
	// many bytes instead of as the chunker does.
	Every int
	held  *chunkwire.Held
	fw    *chunkwire.Writer
	sent  map[chunkwire.ID]bool
	tw    io.WriteCloser // the tree, cut and sent as it is written
	tree  []chunkwire.ID
	err   error
}

// NewBox is a Box told held, writing its stream to w.
func NewBox(held *chunkwire.Held, w io.Writer) *Box {
	return &Box{held: held, fw: chunkwire.NewWriter(w), sent: map[chunkwire.ID]bool{}}
}

// Send sends data as a chunk unless it is held or sent, and returns its
// id.
func (b *Box) Send(data []byte) chunkwire.ID {
	id := chunkwire.ID(sha256.Sum256(data))
	if b.held.Has(id) || b.sent[id] || b.err != nil {
		return id
	}
	b.sent[id] = true
	c := chunkwire.Chunk{ID: id, Plain: uint32(len(data)), Stored: data}
	if b.Compress != nil {
		c.Compression, c.Stored = chunkwire.Zstd, b.Compress(data)
	}
	b.err = b.fw.Chunk(c)
	return id
}

// Chunk sends the frame c as it is (no check of it), unless an earlier
// write failed.
func (b *Box) Chunk(c chunkwire.Chunk) error {
	if b.err == nil {
		b.err = b.fw.Chunk(c)
	}
	return b.err
}

// Err is the first error writing the stream.
func (b *Box) Err() error { return b.err }

// compactMagic is what a compact tree starts with: snaptree's empty
// tree but its end record.
func compactMagic() []byte {
	var tree []byte
	e := snaptree.NewEncoder(func(_ snaptree.ID, data []byte) error { tree = append(tree, data...); return nil })
	if _, _, err := e.Close(); err != nil {
		panic(err)
	}
	return tree[:len(tree)-1]
}

// Raw appends bytes to the tree as they are.
func (b *Box) Raw(p []byte) {
	if b.tw == nil {
		emit := func(c []byte) error {
			b.tree = append(b.tree, b.Send(c))
			return b.err
		}
		b.tw = cdc.NewWriter(emit)
		if b.Every > 0 {
			b.tw = &fixedCut{n: b.Every, emit: emit}
		}
		b.Raw(compactMagic())
	}
	if _, err := b.tw.Write(p); err != nil && b.err == nil {
		b.err = err
	}
}

// Entry appends a record: type, name, size, PAX records, the count of
// ids it says (FileOf writes them) and a link target.
func (b *Box) Entry(typ byte, name string, size int64, pax [][2]string, nids int, link ...string) {
	f := []byte{typ}
	for _, s := range []string{name, strings.Join(link, ""), "root", "root"} {
		f = append(binary.AppendUvarint(f, uint64(len(s))), s...)
	}
	for _, v := range []uint64{0o755, 0, 0} {
		f = binary.AppendUvarint(f, v)
	}
	f = binary.AppendVarint(f, 1700000000)
	for _, v := range []uint64{0, 0, 0, uint64(size), uint64(len(pax))} {
		f = binary.AppendUvarint(f, v)
	}
	for _, kv := range pax {
		for _, s := range kv {
			f = append(binary.AppendUvarint(f, uint64(len(s))), s...)
		}
	}
	f = binary.AppendUvarint(f, uint64(nids))
	b.Raw(append(binary.AppendUvarint(nil, uint64(len(f))), f...))
}

// FileOf appends a regular file of size bytes naming ids, and ends.
func (b *Box) FileOf(name string, size int64, ids ...chunkwire.ID) error {
	b.Entry('0', name, size, nil, len(ids))
	for _, id := range ids {
		b.Raw(id[:])
	}
	return b.End()
}

// End ends the tree and sends its last chunk and the end frame.
func (b *Box) End() error {
	tree, err := b.Cut()
	if err != nil {
		return err
	}
	return b.EndWith(tree)
}

// Cut ends the tree (its end record) and returns its chunks.
func (b *Box) Cut() ([]chunkwire.ID, error) {
	b.Raw([]byte{0})
	if err := b.tw.Close(); err != nil {
		return nil, err
	}
	return b.tree, b.err
}

// EndWith sends the end frame naming tree.
func (b *Box) EndWith(tree []chunkwire.ID) error {
	if b.err != nil {
		return b.err
	}
	return b.fw.End(chunkwire.End{Entries: 1, Tree: tree})
}

// Content is n bytes of chunk i's content: zeros after a counter.
func Content(n, i int) []byte {
	c := make([]byte, n)
	copy(c, binary.BigEndian.AppendUint64(nil, uint64(i)))
	return c
}

// Repeat is n times id.
func Repeat(id chunkwire.ID, n int) []chunkwire.ID {
	out := make([]chunkwire.ID, n)
	for i := range out {
		out[i] = id
	}
	return out
}

// PAX is n PAX records of values of size bytes.
func PAX(n, size int) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{fmt.Sprintf("SCHILY.xattr.user.k%04d", i), strings.Repeat("v", size)}
	}
	return out
}

// fixedCut cuts what is written to it every n bytes.
type fixedCut struct {
	n    int
	buf  []byte
	emit func([]byte) error
}

func (f *fixedCut) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for len(f.buf) >= f.n {
		if err := f.emit(f.buf[:f.n]); err != nil {
			return 0, err
		}
		f.buf = f.buf[f.n:]
	}
	return len(p), nil
}

func (f *fixedCut) Close() error {
	if len(f.buf) == 0 {
		return nil
	}
	return f.emit(f.buf)
}
