package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// Limits bound what a snapshot takes from the box. The parts come from the
// agent, which may be hostile: a stream of huge names, of endless entries or
// of endless bytes must fail the snapshot, not fill the host's memory or
// disk. The zero value of a field means its default.
type Limits struct {
	// MaxPart is the most bytes of one part as streamed (compressed);
	// config.SnapshotPartCap derives it from the box's disks.
	MaxPart int64
	// MaxUnpacked is the most bytes a part's archive may unpack to
	// (gzip bombs); default 4 × MaxPart.
	MaxUnpacked int64
	// MaxEntries is the most entries of one part.
	MaxEntries int
	// MaxName is the longest entry name, in bytes (Linux's PATH_MAX).
	MaxName int
	// MaxNames is the most bytes of all the entry names of one part
	// together, which the listing holds in memory.
	MaxNames int64
	// Reserve is the host free space a snapshot leaves: checked before
	// writing and every CheckEvery bytes while writing.
	Reserve    int64
	CheckEvery int64
	// FreeSpace reports the free bytes of the file system holding dir;
	// HostFreeSpace when nil.
	FreeSpace func(dir string) (int64, error)
}

// The defaults of Limits.
const (
	DefaultMaxPart    = 64 << 30
	DefaultMaxEntries = 1_000_000
	DefaultMaxName    = 4096
	DefaultMaxNames   = 24 << 20
	DefaultReserve    = 1 << 30
	DefaultCheckEvery = 64 << 20
)

// ErrLimit is matched by every error of a limit exceeded.
var ErrLimit = bounded.ErrLimit

// ErrNoSpace is the host's file system running out of room.
var ErrNoSpace = errors.New("not enough free space on the host")

// WithDefaults is l with every zero field its default.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.MaxPart <= 0 {
		l.MaxPart = DefaultMaxPart
	}
	if l.MaxUnpacked <= 0 {
		l.MaxUnpacked = 4 * l.MaxPart
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxName <= 0 {
		l.MaxName = DefaultMaxName
	}
	if l.MaxNames <= 0 {
		l.MaxNames = DefaultMaxNames
	}
	if l.Reserve <= 0 {
		l.Reserve = DefaultReserve
	}
	if l.CheckEvery <= 0 {
		l.CheckEvery = DefaultCheckEvery
	}
	if l.FreeSpace == nil {
		l.FreeSpace = HostFreeSpace
	}
	return l
}

// checkFree fails when the file system of dir has less than Reserve free.
func (l Limits) checkFree(dir string) error {
	free, err := l.FreeSpace(dir)
	if err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	if free < l.Reserve {
		return fmt.Errorf("%w: %s has %s free, a snapshot keeps at least %s free", ErrNoSpace, dir, bounded.Human(free), bounded.Human(l.Reserve))
	}
	return nil
}

// maxListing bounds rootfs-files.txt: one name and its newline per entry.
const maxListing = DefaultMaxNames + DefaultMaxEntries

// checkStage checks the sizes of a backup's files (Lstat, before anything
// is copied): each archive within MaxPart, the others within what is read
// of them, and all of them within the free space of dir less Reserve.
func (l Limits) checkStage(src, dir string) error {
	var total int64
	for _, name := range Files {
		fi, err := os.Lstat(filepath.Join(src, name))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrInvalid, name)
		}
		if err := l.CheckFile(name, fi.Size()); err != nil {
			return err
		}
		total += fi.Size()
	}
	free, err := l.FreeSpace(dir)
	if err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	if total > free-l.Reserve {
		return fmt.Errorf("%w: the backup's %s need room in %s, which has %s free, and at least %s stays free",
			ErrNoSpace, bounded.Human(total), dir, bounded.Human(free), bounded.Human(l.Reserve))
	}
	return nil
}

// CheckFile fails when a backup's file name of size bytes is over what
// is read of it: an archive over MaxPart, the listing over maxListing,
// any other (the manifest, SHA256SUMS, its signature) over the bytes
// read whole.
func (l Limits) CheckFile(name string, size int64) error {
	limit, what := int64(maxSmallFile), name
	switch name {
	case FileRootfs, FileWorkspace:
		limit, what = l.withDefaults().MaxPart, name+" (the part cap, HERMES_BOX_SNAPSHOT_MAX_MIB)"
	case FileListing:
		limit = maxListing
	}
	if size < 0 || size > limit {
		return &bounded.LimitError{What: what, Limit: limit}
	}
	return nil
}

// partWriter counts the bytes of one part, failing past MaxPart, and
// checks the host's free space every CheckEvery bytes.
type partWriter struct {
	w         io.Writer
	lim       Limits
	dir, part string
	n, next   int64
}

func (p *partWriter) Write(b []byte) (int, error) {
	if p.n+int64(len(b)) > p.lim.MaxPart {
		return 0, &bounded.LimitError{What: "the " + p.part + " part of the snapshot (HERMES_BOX_SNAPSHOT_MAX_MIB)", Limit: p.lim.MaxPart}
	}
	if p.n >= p.next {
		if err := p.lim.checkFree(p.dir); err != nil {
			return 0, err
		}
		p.next = p.n + p.lim.CheckEvery
	}
	n, err := p.w.Write(b)
	p.n += int64(n)
	return n, err
}

// listBudget counts entries and name bytes of one archive.
type listBudget struct {
	lim     Limits
	entries int
	names   int64
}

func (b *listBudget) add(name string) error {
	if len(name) > b.lim.MaxName {
		return fmt.Errorf("%w: an entry name of %d bytes exceeds the limit of %d bytes (starts %q)", ErrLimit, len(name), b.lim.MaxName, name[:min(64, len(name))])
	}
	b.entries++
	b.names += int64(len(name))
	if b.entries > b.lim.MaxEntries {
		return &bounded.LimitError{What: "the number of entries", Limit: int64(b.lim.MaxEntries), Unit: "entries"}
	}
	if b.names > b.lim.MaxNames {
		return &bounded.LimitError{What: "the entry names together", Limit: b.lim.MaxNames}
	}
	return nil
}

// Guard bounds the stream of one part written to w, as Write bounds each
// part it stores in dir: past MaxPart it fails, and every CheckEvery
// bytes (the first write included) the free space of dir is checked.
func (l Limits) Guard(w io.Writer, dir, part string) io.Writer {
	return &partWriter{w: w, lim: l.withDefaults(), dir: dir, part: part}
}

// ListTar is List of a tar stream that is not compressed (an incremental
// snapshot's tree, decoded); ctx stops it between reads.
func (l Limits) ListTar(ctx context.Context, r io.Reader) ([]string, error) {
	return listTar(ctxReader{ctx, r}, l.withDefaults())
}

// List is ListArchive within l's entry, name and unpacked limits.
func (l Limits) List(ctx context.Context, r io.Reader) ([]string, error) {
	return listArchive(ctx, r, l.withDefaults())
}
