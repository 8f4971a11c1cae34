package snaptree

import (
	"archive/tar"
	"bufio"
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

// Entry is one entry of a tree, as Entries gives it.
type Entry struct {
	// Header is the entry's header as the tar stream the tree describes
	// has it: a regular file's Size is its content's, and SizeRecord is
	// gone from its PAX records.
	Header *tar.Header
	ids    io.Reader // a regular file's chunk ids; nil for other entries
}

// Chunks calls sizeOf with each chunk id of a regular file's content, in
// order, and checks that the sizes it returns add up to the file's;
// sizeOf returns a chunk's size or why it cannot. then, when not nil, is
// called after each chunk that fits in what is left of the size (Decode
// writes the chunk sizeOf fetched). Chunks is called at most once, and
// only while Entries' fn runs.
func (e Entry) Chunks(sizeOf func(ID) (int64, error), then func() error) error {
	if e.ids == nil {
		return nil
	}
	name, size := e.Header.Name, e.Header.Size
	left := size
	var id ID
	for i := 0; ; {
		if _, err := io.ReadFull(e.ids, id[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
		}
		n, err := sizeOf(id)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case n > left:
			return fmt.Errorf("%w: %s: its chunks exceed its size of %d bytes", ErrInvalid, name, size)
		case n == 0:
			return fmt.Errorf("%w: %s: chunk %d is empty", ErrInvalid, name, i)
		case n < MinChunk && n < left:
			return fmt.Errorf("%w: %s: chunk %d has %d bytes, short of the %d every chunk but a file's last has", ErrInvalid, name, i, n, MinChunk)
		}
		left -= n
		i++
		if then != nil {
			if err := then(); err != nil {
				return err
			}
		}
	}
	if left != 0 {
		return fmt.Errorf("%w: %s: its chunks are %d bytes short of its size of %d", ErrInvalid, name, left, size)
	}
	return nil
}

// Entries reads the tree and calls fn with each entry in order, without
// reading any file's content: what a tree says of its files is checked,
// what its chunks hold is left to Entry.Chunks. A tree that breaks the
// format is an ErrInvalid error naming the entry. Both formats are read:
// the compact one (compact.go), and the tar stream of trees written before it.
func Entries(tree io.Reader, fn func(Entry) error) error {
	br := bufio.NewReaderSize(tree, 64<<10)
	if head, _ := br.Peek(len(treeMagic)); string(head) != treeMagic {
		return tarEntries(br, fn)
	}
	if _, err := br.Discard(len(treeMagic)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return compactEntries(br, fn)
}

// compactEntries is Entries of a tree in the compact format, past its
// magic.
func compactEntries(br *bufio.Reader, fn func(Entry) error) error {
	c := &compactReader{r: br}
	for {
		hdr, n, err := c.next()
		if err != nil || hdr == nil {
			return err
		}
		e := Entry{Header: hdr}
		var ids *io.LimitedReader
		if hdr.Typeflag == tar.TypeReg {
			ids = &io.LimitedReader{R: br, N: n * int64(len(ID{}))}
			e.ids = ids
		}
		if err := fn(e); err != nil {
			return err
		}
		// The ids fn left unread are skipped; fewer than the record
		// says is a tree cut short.
		if ids != nil && ids.N > 0 {
			if _, err := io.CopyN(io.Discard, ids, ids.N); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, noEOF(err))
			}
		}
	}
}

// tarEntries is Entries of a tree in the tar format.
func tarEntries(tree io.Reader, fn func(Entry) error) error {
	tr := tar.NewReader(tree)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		e, err := entryOf(hdr, tr)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// entryOf checks a tar tree entry's header and gives it as the tar stream
// has it.
func entryOf(hdr *tar.Header, tr *tar.Reader) (Entry, error) {
	sizeText, isFile := hdr.PAXRecords[SizeRecord]
	switch {
	case isFile && hdr.Typeflag != tar.TypeReg:
		return Entry{}, fmt.Errorf("%w: %s: type %q with a %s record", ErrInvalid, hdr.Name, hdr.Typeflag, SizeRecord)
	case !isFile && hdr.Typeflag == tar.TypeReg:
		return Entry{}, fmt.Errorf("%w: %s: a regular file without a %s record", ErrInvalid, hdr.Name, SizeRecord)
	}
	if err := checkPAX(hdr); err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, err)
	}
	if !isFile {
		if hdr.Size != 0 {
			return Entry{}, fmt.Errorf("%w: %s (type %q) has a body", ErrInvalid, hdr.Name, hdr.Typeflag)
		}
		return Entry{Header: hdr}, nil
	}
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 0 {
		return Entry{}, fmt.Errorf("%w: %s: %s %q is not a size", ErrInvalid, hdr.Name, SizeRecord, sizeText)
	}
	if hdr.Size%int64(len(ID{})) != 0 {
		return Entry{}, fmt.Errorf("%w: %s: %d bytes of chunk ids", ErrInvalid, hdr.Name, hdr.Size)
	}
	h := *hdr
	h.PAXRecords = make(map[string]string, len(hdr.PAXRecords)-1)
	for k, v := range hdr.PAXRecords {
		if k != SizeRecord {
			h.PAXRecords[k] = v
		}
	}
	h.Size = size
	return Entry{Header: &h, ids: tr}, nil
}

// Decode reads the tree and writes the tar stream it describes to w,
// fetching each file's chunks. Every file's chunks must add up to the
// size its tree entry records; a tree that breaks the format is an
// ErrInvalid error naming the entry.
func Decode(tree io.Reader, fetch Fetch, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := Entries(tree, func(e Entry) error {
		if err := tw.WriteHeader(e.Header); err != nil {
			return fmt.Errorf("writing %s: %w", e.Header.Name, err)
		}
		var data []byte
		sizeOf := func(id ID) (int64, error) {
			var err error
			data, err = fetch(id)
			return int64(len(data)), err
		}
		return e.Chunks(sizeOf, func() error {
			if _, err := tw.Write(data); err != nil {
				return fmt.Errorf("writing %s: %w", e.Header.Name, err)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
