package snaptree

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/hermes-box/hermes-box/shared/cdc"
)

// Encoder builds a tree from entries given one at a time, as a walk of a
// file system gives them: a header (WriteHeader), then a regular file's
// content, exactly its header's size, through Write; or a regular file
// whose chunks are already known (WriteKnown), whose content is not read.
// Content and tree chunks go to the sink as they are cut.
type Encoder struct {
	sink Sink
	// OnFile, when set, is called with each regular file's header and
	// chunk ids (32 bytes each) once its content is complete.
	OnFile func(hdr *tar.Header, ids []byte)

	tree []ID
	cw   *cdc.Writer // cuts the tree
	rec  []byte      // scratch: a record's fields
	out  []byte      // scratch: a record as written
	keys []string    // scratch: a record's PAX keys
	file *cdc.Writer // cuts the open file's content
	hdr  *tar.Header // the open file; nil between files
	left int64
	ids  []byte
	st   Stats
	err  error
}

// ErrShort is a file whose content ended before its header's size.
var ErrShort = errors.New("file content shorter than its header says")

// NewEncoder returns an Encoder passing every chunk to sink.
func NewEncoder(sink Sink) *Encoder {
	e := &Encoder{sink: sink}
	e.cw = cdc.NewWriter(func(data []byte) error {
		id := sha256.Sum256(data)
		e.tree = append(e.tree, id)
		return e.sink(id, data)
	})
	if _, err := e.cw.Write([]byte(treeMagic)); err != nil {
		e.err = err
	}
	e.file = cdc.NewWriter(func(data []byte) error {
		id := sha256.Sum256(data)
		e.ids = append(e.ids, id[:]...)
		e.st.Read += int64(len(data))
		return e.sink(id, data)
	})
	return e
}

// WriteHeader starts an entry. An entry that is not a regular file has no
// body; a regular file's content follows through Write.
func (e *Encoder) WriteHeader(hdr *tar.Header) error {
	if e.err != nil {
		return e.err
	}
	if e.hdr != nil {
		return e.fail(fmt.Errorf("%w: %s: %d bytes missing", ErrShort, e.hdr.Name, e.left))
	}
	e.st.Entries++
	if hdr.Typeflag != tar.TypeReg {
		if hdr.Size != 0 {
			return e.fail(fmt.Errorf("reading tar: %s (type %q) has a body", hdr.Name, hdr.Typeflag))
		}
		return e.writeEntry(hdr, nil)
	}
	h := *hdr
	e.hdr, e.left, e.ids = &h, hdr.Size, e.ids[:0]
	if e.left == 0 {
		return e.endFile()
	}
	return nil
}

// Write passes the open file's content on to the chunker; the write that
// completes the file ends its entry.
func (e *Encoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.hdr == nil || int64(len(p)) > e.left {
		return 0, e.fail(fmt.Errorf("writing the tree: content beyond the entry's size"))
	}
	if _, err := e.file.Write(p); err != nil {
		return 0, e.fail(err)
	}
	if e.left -= int64(len(p)); e.left == 0 {
		if err := e.endFile(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// WriteKnown writes a regular file whose content hdr.Size bytes are the
// chunks ids (32 bytes each) already known: the sink does not see them.
func (e *Encoder) WriteKnown(hdr *tar.Header, ids []byte) error {
	if e.err != nil {
		return e.err
	}
	if e.hdr != nil {
		return e.fail(fmt.Errorf("%w: %s: %d bytes missing", ErrShort, e.hdr.Name, e.left))
	}
	e.st.Entries++
	e.st.Bytes += hdr.Size
	return e.writeEntry(hdr, ids)
}

// endFile closes the open file's chunks and writes its tree entry.
func (e *Encoder) endFile() error {
	if err := e.file.Close(); err != nil {
		return e.fail(err)
	}
	h := e.hdr
	e.hdr = nil
	e.st.Bytes += h.Size
	if err := e.writeEntry(h, e.ids); err != nil {
		return err
	}
	if e.OnFile != nil {
		e.OnFile(h, e.ids)
	}
	return nil
}

// Close ends the tree and returns its chunk ids in order, and what was
// encoded.
func (e *Encoder) Close() (tree []ID, st Stats, err error) {
	if e.err != nil {
		return nil, e.st, e.err
	}
	if e.hdr != nil {
		return nil, e.st, e.fail(fmt.Errorf("%w: %s: %d bytes missing", ErrShort, e.hdr.Name, e.left))
	}
	if _, err := e.cw.Write([]byte{0}); err != nil { // the end record
		return nil, e.st, e.fail(err)
	}
	if err := e.cw.Close(); err != nil {
		return nil, e.st, e.fail(err)
	}
	return e.tree, e.st, nil
}

// writeEntry writes hdr's record to the tree, and a regular file's chunk
// ids (32 bytes each) after it.
func (e *Encoder) writeEntry(hdr *tar.Header, ids []byte) error {
	if min(hdr.Mode, hdr.Size, hdr.Devmajor, hdr.Devminor) < 0 || hdr.Uid < 0 || hdr.Gid < 0 || max(hdr.Uid, hdr.Gid) > math.MaxInt32 {
		return e.fail(fmt.Errorf("writing the tree: %s: a negative or out of range number in its header", hdr.Name))
	}
	if err := checkPAX(hdr); err != nil {
		return e.fail(fmt.Errorf("writing the tree: %s: %w", hdr.Name, err))
	}
	e.rec, e.keys = appendFields(e.rec[:0], hdr, len(ids)/len(ID{}), e.keys)
	if len(e.rec) > MaxRecord {
		return e.fail(fmt.Errorf("writing the tree: %s: its names and PAX records take %d bytes, over the limit of %d", hdr.Name, len(e.rec), MaxRecord))
	}
	e.out = append(append(binary.AppendUvarint(e.out[:0], uint64(len(e.rec))), e.rec...), ids...)
	if _, err := e.cw.Write(e.out); err != nil {
		return e.fail(err)
	}
	return nil
}

func (e *Encoder) fail(err error) error {
	e.err = err
	return err
}

// Encode reads the tar stream r, passes every chunk of every regular
// file's content and then every chunk of the tree to sink, and returns
// the tree's chunk ids in order.
func Encode(r io.Reader, sink Sink) (tree []ID, st Stats, err error) {
	e := NewEncoder(sink)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, e.st, fmt.Errorf("reading tar: %w", err)
		}
		if err := e.WriteHeader(hdr); err != nil {
			return nil, e.st, err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			if _, err := io.Copy(e, tr); err != nil {
				return nil, e.st, fmt.Errorf("reading %s: %w", hdr.Name, err)
			}
		}
	}
	return e.Close()
}
