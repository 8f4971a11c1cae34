package snaptree

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Fetch returns a chunk's content, checked against its id.
type Fetch func(id ID) ([]byte, error)

// ErrInvalid marks a tree that breaks the format.
var ErrInvalid = errors.New("invalid snapshot tree")

// Reader reads the concatenation of chunks ids, fetching one at a time.
func Reader(ids []ID, fetch Fetch) io.Reader {
	return &chunkReader{ids: ids, fetch: fetch}
}

type chunkReader struct {
	ids   []ID
	fetch Fetch
	cur   []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if len(r.ids) == 0 {
			return 0, io.EOF
		}
		data, err := r.fetch(r.ids[0])
		if err != nil {
			return 0, err
		}
		r.cur, r.ids = data, r.ids[1:]
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Decode reads the tree and writes the tar stream it describes to w,
// fetching each file's chunks. Every file's chunks must add up to the
// size its tree entry records; a tree that breaks the format is an
// ErrInvalid error naming the entry.
func Decode(tree io.Reader, fetch Fetch, w io.Writer) error {
	tr := tar.NewReader(tree)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := decodeEntry(tr, hdr, fetch, tw); err != nil {
			return err
		}
	}
	return tw.Close()
}

func decodeEntry(tr *tar.Reader, hdr *tar.Header, fetch Fetch, tw *tar.Writer) error {
	sizeText, isFile := hdr.PAXRecords[SizeRecord]
	switch {
	case isFile && hdr.Typeflag != tar.TypeReg:
		return fmt.Errorf("%w: %s: type %q with a %s record", ErrInvalid, hdr.Name, hdr.Typeflag, SizeRecord)
	case !isFile && hdr.Typeflag == tar.TypeReg:
		return fmt.Errorf("%w: %s: a regular file without a %s record", ErrInvalid, hdr.Name, SizeRecord)
	}
	if !isFile {
		if hdr.Size != 0 {
			return fmt.Errorf("%w: %s (type %q) has a body", ErrInvalid, hdr.Name, hdr.Typeflag)
		}
		return tw.WriteHeader(hdr)
	}
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("%w: %s: %s %q is not a size", ErrInvalid, hdr.Name, SizeRecord, sizeText)
	}
	if hdr.Size%int64(len(ID{})) != 0 {
		return fmt.Errorf("%w: %s: %d bytes of chunk ids", ErrInvalid, hdr.Name, hdr.Size)
	}
	h := *hdr
	h.PAXRecords = map[string]string{}
	for k, v := range hdr.PAXRecords {
		if k != SizeRecord {
			h.PAXRecords[k] = v
		}
	}
	h.Size = size
	if err := tw.WriteHeader(&h); err != nil {
		return fmt.Errorf("writing %s: %w", hdr.Name, err)
	}
	left := size
	var id ID
	for {
		if _, err := io.ReadFull(tr, id[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, err)
		}
		data, err := fetch(id)
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if int64(len(data)) > left {
			return fmt.Errorf("%w: %s: its chunks exceed its size of %d bytes", ErrInvalid, hdr.Name, size)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("writing %s: %w", hdr.Name, err)
		}
		left -= int64(len(data))
	}
	if left != 0 {
		return fmt.Errorf("%w: %s: its chunks are %d bytes short of its size of %d", ErrInvalid, hdr.Name, left, size)
	}
	return nil
}
