package snaptree

import (
	"archive/tar"
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// The tree's format. A tree is treeMagic, then one record for each entry in
// the walk's order, then an empty record; nothing follows. A record is
// its length (uvarint, at most MaxRecord) and its fields; a regular
// file's record is followed by its chunk ids, 32 bytes each, as many as
// the record says. The fields, in order: the type flag (one byte), the
// name, link name, user name and group name (each a uvarint length and
// its bytes), the mode, uid and gid (uvarints), the modification time
// (varint seconds and uvarint nanoseconds), the device major and minor
// numbers (uvarints), the content's size (uvarint), the PAX records
// (a uvarint count, then each key and value, sorted by key) and the
// count of chunk ids (uvarint). A tree written before this format (a
// tar stream whose files hold their chunk ids, their sizes in
// SizeRecord) still decodes.
//
// About 100 bytes an entry where the tar form took 2 KiB, which every
// snapshot cuts, hashes, compresses, sends and checks again: most of a
// box's tree is sent anew each time, as a change of 1% of the files
// touches nearly every chunk of it.

// treeMagic starts a tree.
const treeMagic = "hermes-box tree 2\n"

// typeflags are the entry types a tree holds.
var typeflags = []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeChar, tar.TypeBlock}

// appendFields appends the fields of hdr's record, a regular file's with
// n chunk ids; keys is scratch space for the PAX keys, returned for
// reuse.
func appendFields(b []byte, hdr *tar.Header, n int, keys []string) ([]byte, []string) {
	b = append(b, hdr.Typeflag)
	for _, s := range []string{hdr.Name, hdr.Linkname, hdr.Uname, hdr.Gname} {
		b = appendString(b, s)
	}
	for _, v := range []int64{hdr.Mode, int64(hdr.Uid), int64(hdr.Gid)} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendVarint(b, hdr.ModTime.Unix())
	b = binary.AppendUvarint(b, uint64(hdr.ModTime.Nanosecond()))
	b = binary.AppendUvarint(b, uint64(hdr.Devmajor))
	b = binary.AppendUvarint(b, uint64(hdr.Devminor))
	b = binary.AppendUvarint(b, uint64(hdr.Size))
	keys = keys[:0]
	for k := range hdr.PAXRecords {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(appendString(b, k), hdr.PAXRecords[k])
	}
	return binary.AppendUvarint(b, uint64(n)), keys
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// compactReader reads a tree in this format.
type compactReader struct {
	r   *bufio.Reader
	buf []byte
}

// next reads the next record; nil at the tree's end.
func (c *compactReader) next() (*tar.Header, int64, error) {
	n, err := binary.ReadUvarint(c.r)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: a record's length: %w", ErrInvalid, noEOF(err))
	}
	if n == 0 {
		if _, err := c.r.ReadByte(); !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("%w: bytes after the tree's end", ErrInvalid)
		}
		return nil, 0, nil
	}
	if n > MaxRecord {
		return nil, 0, fmt.Errorf("%w: a record of %d bytes, over the limit of %d", ErrInvalid, n, MaxRecord)
	}
	if cap(c.buf) < int(n) {
		c.buf = make([]byte, n)
	}
	rec := c.buf[:n]
	if _, err := io.ReadFull(c.r, rec); err != nil {
		return nil, 0, fmt.Errorf("%w: a record: %w", ErrInvalid, noEOF(err))
	}
	d := fields{b: rec}
	hdr, ids := d.header()
	if d.err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, d.err)
	}
	if len(d.b) != 0 {
		return nil, 0, fmt.Errorf("%w: %s: %d bytes after its record's fields", ErrInvalid, hdr.Name, len(d.b))
	}
	if !slices.Contains(typeflags, hdr.Typeflag) {
		return nil, 0, fmt.Errorf("%w: %s: entry type %q", ErrInvalid, hdr.Name, hdr.Typeflag)
	}
	if hdr.Typeflag != tar.TypeReg && (hdr.Size != 0 || ids != 0) {
		return nil, 0, fmt.Errorf("%w: %s (type %q) has a body", ErrInvalid, hdr.Name, hdr.Typeflag)
	}
	if err := checkPAX(hdr); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, err)
	}
	if max := hdr.Size/MinChunk + 1; ids > max {
		return nil, 0, fmt.Errorf("%w: %s: %d chunks for %d bytes, over the limit of %d (one per %d bytes, and the last)", ErrInvalid, hdr.Name, ids, hdr.Size, max, MinChunk)
	}
	return hdr, ids, nil
}

// fields decodes a record's fields; the first error sticks.
type fields struct {
	b   []byte
	err error
}

func (f *fields) header() (*tar.Header, int64) {
	hdr := &tar.Header{Typeflag: f.byte()}
	hdr.Name, hdr.Linkname, hdr.Uname, hdr.Gname = f.string(), f.string(), f.string(), f.string()
	hdr.Mode, hdr.Uid, hdr.Gid = f.number(math.MaxInt64), int(f.number(math.MaxInt32)), int(f.number(math.MaxInt32))
	sec := f.varint()
	nsec := f.uvarint()
	if nsec >= 1e9 && f.err == nil {
		f.err = fmt.Errorf("%d nanoseconds", nsec)
	}
	hdr.ModTime = time.Unix(sec, int64(nsec))
	hdr.Devmajor, hdr.Devminor, hdr.Size = f.number(math.MaxInt64), f.number(math.MaxInt64), f.number(math.MaxInt64)
	if n := f.uvarint(); n > MaxPAXRecords && f.err == nil {
		f.err = fmt.Errorf("%d PAX records, over the limit of %d", n, MaxPAXRecords)
	} else if n > 0 && f.err == nil {
		hdr.PAXRecords = make(map[string]string, n)
		prev := ""
		for i := uint64(0); i < n && f.err == nil; i++ {
			k, v := f.string(), f.string()
			if i > 0 && k <= prev && f.err == nil {
				f.err = fmt.Errorf("PAX record %q out of order", k)
			}
			hdr.PAXRecords[k], prev = v, k
		}
	}
	return hdr, f.number(math.MaxInt64 / uint64(len(ID{})))
}

func (f *fields) byte() byte {
	if f.err == nil && len(f.b) == 0 {
		f.err = io.ErrUnexpectedEOF
	}
	if f.err != nil {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fields) uvarint() uint64 {
	if f.err != nil {
		return 0
	}
	v, n := binary.Uvarint(f.b)
	f.skip(n)
	return v
}

func (f *fields) varint() int64 {
	if f.err != nil {
		return 0
	}
	v, n := binary.Varint(f.b)
	f.skip(n)
	return v
}

// skip passes the n bytes a number took; n <= 0 is a number that does
// not decode.
func (f *fields) skip(n int) {
	if n <= 0 {
		f.err = errors.New("a number that does not decode")
		return
	}
	f.b = f.b[n:]
}

// number is a uvarint of at most max.
func (f *fields) number(max uint64) int64 {
	v := f.uvarint()
	if v > max && f.err == nil {
		f.err = fmt.Errorf("%d is out of range", v)
	}
	return int64(v)
}

func (f *fields) string() string {
	n := f.uvarint()
	if f.err == nil && n > uint64(len(f.b)) {
		f.err = io.ErrUnexpectedEOF
	}
	if f.err != nil {
		return ""
	}
	s := string(f.b[:n])
	f.b = f.b[n:]
	return s
}

// noEOF is err, io.EOF made io.ErrUnexpectedEOF: a tree ends with its
// end record only.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
