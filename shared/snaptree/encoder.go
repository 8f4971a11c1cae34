package snaptree

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

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
	tw   *tar.Writer // writes the tree into cw
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
	e.tw = tar.NewWriter(e.cw)
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
		if err := e.tw.WriteHeader(hdr); err != nil {
			return e.fail(fmt.Errorf("writing the tree: %s: %w", hdr.Name, err))
		}
		return nil
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
	if err := writeFile(e.tw, hdr, hdr.Size, ids); err != nil {
		return e.fail(err)
	}
	return nil
}

// endFile closes the open file's chunks and writes its tree entry.
func (e *Encoder) endFile() error {
	if err := e.file.Close(); err != nil {
		return e.fail(err)
	}
	h := e.hdr
	e.hdr = nil
	e.st.Bytes += h.Size
	if err := writeFile(e.tw, h, h.Size, e.ids); err != nil {
		return e.fail(err)
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
	if err := e.tw.Close(); err != nil {
		return nil, e.st, e.fail(fmt.Errorf("writing the tree: %w", err))
	}
	if err := e.cw.Close(); err != nil {
		return nil, e.st, e.fail(err)
	}
	return e.tree, e.st, nil
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
