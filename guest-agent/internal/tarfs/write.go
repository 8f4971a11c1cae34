package tarfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WriteOptions tune Write.
type WriteOptions struct {
	// Exclude lists slash paths below the directory left out with
	// everything below them.
	Exclude []string
	// Owner reads the numeric owner of a path; nil takes it from the
	// file. Provisioning passes its injectable owner.
	Owner func(path string) (uid, gid int, err error)
	// Known, when set, is asked before a regular file with content is
	// read: true means it wrote the entry itself (its content known by
	// the file's identity and times), and the walk does not read it.
	Known func(hdr *tar.Header, fi os.FileInfo) (bool, error)
}

// Entries receive what Walk archives: each entry's header, then a regular
// file's content. A *tar.Writer is one; snaptree's Encoder is another.
type Entries interface {
	WriteHeader(hdr *tar.Header) error
	io.Writer
}

// Write archives dir as a tar on w, named as `tar -C DIR -cf - .` names it
// ("./" for the top, "./etc/" for directories, "./etc/passwd" for the
// rest), with numeric owners, modes with set-id bits, times, hard links,
// devices and extended attributes, never leaving dir's file system. Any
// entry that cannot be read completely fails the whole archive. It is the
// module's one tar writer: boot's seed, snapshots and their tests use it.
func Write(ctx context.Context, w io.Writer, dir string, opt WriteOptions) error {
	tw := tar.NewWriter(w)
	if err := Walk(ctx, tw, dir, opt); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finishing the tar of %s: %w", dir, err)
	}
	return nil
}

// Walk passes the entries Write archives to tw, in the same order and by
// the same rules, without ending the archive.
func Walk(ctx context.Context, tw Entries, dir string, opt WriteOptions) error {
	wr := &writer{ctx: ctx, tw: tw, top: dir, owner: opt.Owner, known: opt.Known, links: map[fileID]string{}, buf: make([]byte, 256<<10)}
	wr.exclude = map[string]bool{}
	for _, x := range opt.Exclude {
		wr.exclude[x] = true
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("archiving %s: not a directory", dir)
	}
	wr.dev = statOf(st).Dev
	return wr.walk("", st)
}

type fileID struct{ dev, ino uint64 }

// writer archives one directory tree.
type writer struct {
	ctx     context.Context
	tw      Entries
	top     string
	dev     uint64
	exclude map[string]bool
	owner   func(string) (int, int, error)
	known   func(*tar.Header, os.FileInfo) (bool, error)
	links   map[fileID]string
	buf     []byte
}

// walk writes the entry rel (slash path below top, "" for top) and, for a
// directory on the same file system, everything below it in name order.
func (wr *writer) walk(rel string, fi os.FileInfo) error {
	if err := wr.ctx.Err(); err != nil {
		return err
	}
	full := filepath.Join(wr.top, filepath.FromSlash(rel))
	st := statOf(fi)
	if fi.Mode()&os.ModeSocket != 0 {
		return nil // sockets cannot be archived; they are recreated by their servers
	}
	hdr, err := wr.header(full, rel, fi, st)
	if err != nil {
		return err
	}
	if wr.known != nil && hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
		if done, err := wr.known(hdr, fi); err != nil || done {
			return err
		}
	}
	if err := wr.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing header of %s: %w", full, err)
	}
	switch {
	case hdr.Typeflag == tar.TypeReg && hdr.Size > 0:
		return wr.copyFile(full, hdr.Size)
	case hdr.Typeflag == tar.TypeDir && uint64(st.Dev) == wr.dev:
		return wr.walkDir(rel, full)
	}
	return nil
}

func (wr *writer) walkDir(rel, full string) error {
	d, err := os.Open(full)
	if err != nil {
		return fmt.Errorf("reading directory %s: %w", full, err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("reading directory %s: %w", full, err)
	}
	slices.Sort(names)
	for _, n := range names {
		child := path.Join(rel, n)
		if wr.exclude[child] {
			continue
		}
		cfi, err := lstat(filepath.Join(full, n))
		if err != nil {
			return fmt.Errorf("archiving %s: %w", filepath.Join(full, n), err)
		}
		if err := wr.walk(child, cfi); err != nil {
			return err
		}
	}
	return nil
}

// EntryName is the archive name of rel: "./" for the top, a trailing slash
// for directories.
func EntryName(rel string, dir bool) string {
	if rel == "" {
		return "./"
	}
	if dir {
		return "./" + rel + "/"
	}
	return "./" + rel
}

func (wr *writer) header(full, rel string, fi os.FileInfo, st *syscall.Stat_t) (*tar.Header, error) {
	hdr := &tar.Header{
		Name:    EntryName(rel, fi.IsDir()),
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(fi.ModTime().Unix(), 0),
	}
	if wr.owner != nil {
		var err error
		if hdr.Uid, hdr.Gid, err = wr.owner(full); err != nil {
			return nil, fmt.Errorf("reading the owner of %s: %w", full, err)
		}
	}
	mode := fi.Mode()
	switch {
	case mode.IsRegular():
		id := fileID{uint64(st.Dev), uint64(st.Ino)}
		if first, ok := wr.links[id]; ok && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return hdr, nil
		}
		if st.Nlink > 1 {
			wr.links[id] = hdr.Name
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	case mode.IsDir():
		hdr.Typeflag = tar.TypeDir
	case mode&os.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return nil, fmt.Errorf("reading symlink %s: %w", full, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case mode&os.ModeNamedPipe != 0:
		hdr.Typeflag = tar.TypeFifo
	case mode&os.ModeDevice != 0:
		hdr.Typeflag = tar.TypeBlock
		if mode&os.ModeCharDevice != 0 {
			hdr.Typeflag = tar.TypeChar
		}
		hdr.Devmajor, hdr.Devminor = int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
	default:
		return nil, fmt.Errorf("archiving %s: unsupported file type %v", full, mode.Type())
	}
	xattrs, err := readXattrs(full)
	if err != nil {
		return nil, err
	}
	for k, v := range xattrs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[paxXattr+k] = v
	}
	return hdr, nil
}

// copyFile copies exactly size bytes of full into the archive, failing when
// the file changed size while it was read.
func (wr *writer) copyFile(full string, size int64) error {
	f, err := os.Open(full)
	if err != nil {
		return fmt.Errorf("reading %s: %w", full, err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(onlyWriter{wr.tw}, io.LimitReader(f, size), wr.buf)
	if err != nil {
		return fmt.Errorf("archiving %s: %w", full, err)
	}
	if n != size {
		return fmt.Errorf("archiving %s: file shrank while it was read (%d of %d bytes)", full, n, size)
	}
	if m, _ := f.Read(wr.buf[:1]); m > 0 {
		return fmt.Errorf("archiving %s: file grew while it was read", full)
	}
	return nil
}

// onlyWriter hides ReadFrom so io.CopyBuffer uses our large buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// readXattrs returns the extended attributes of full (not following
// symlinks); none when the file system has no support for them.
func readXattrs(full string) (map[string]string, error) {
	size, err := unix.Llistxattr(full, nil)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil || size == 0 {
		return readXattrValues(full, nil, err)
	}
	list := make([]byte, size)
	n, err := unix.Llistxattr(full, list)
	return readXattrValues(full, list[:max(n, 0)], err)
}

func readXattrValues(full string, list []byte, err error) (map[string]string, error) {
	if err != nil {
		return nil, fmt.Errorf("listing extended attributes of %s: %w", full, err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		size, err := unix.Lgetxattr(full, name, nil)
		if err != nil {
			return nil, fmt.Errorf("reading extended attribute %s of %s: %w", name, full, err)
		}
		val := make([]byte, size)
		if size > 0 {
			if size, err = unix.Lgetxattr(full, name, val); err != nil {
				return nil, fmt.Errorf("reading extended attribute %s of %s: %w", name, full, err)
			}
		}
		out[name] = string(val[:size])
	}
	return out, nil
}

func lstat(p string) (os.FileInfo, error) { return os.Lstat(p) }

func statOf(fi os.FileInfo) *syscall.Stat_t {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		panic("tarfs: file info without syscall.Stat_t") // unreachable on Linux
	}
	return st
}
