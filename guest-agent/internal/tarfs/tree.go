package tarfs

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// paxXattr prefixes an extended attribute in a PAX header, as GNU tar and
// star write them.
const paxXattr = "SCHILY.xattr."

// treeOpts say how a tree applies entries.
type treeOpts struct {
	// headerOwners applies each entry's uid and gid (only root may).
	headerOwners bool
	// uid and gid own every entry when headerOwners is off; -1 keeps the
	// process's own.
	uid, gid int
	// specials allows device nodes and fifos.
	specials bool
	// modeOf gives the mode bits (permissions, set-id, sticky) of an entry.
	modeOf func(*tar.Header) uint32
	// lenientXattrs ignores attributes the file system or the user cannot
	// hold (ENOTSUP, EPERM), as an unprivileged unpack must.
	lenientXattrs bool
}

// tree writes entries below a held root directory.
type tree struct {
	root   int
	w, aux walker
	opts   treeOpts
	buf    []byte
	umask  uint32
	euid   int
	egid   int
	isRoot bool
	// dirs holds directory metadata applied by finish.
	dirs map[string]dirMeta
	// bytes counts regular file bytes written.
	bytes int64
}

type dirMeta struct {
	mode       uint32
	uid, gid   int
	atime      unix.Timespec
	mtime      unix.Timespec
	paxRecords map[string]string
}

func openTree(dest string, opts treeOpts) (*tree, error) {
	fd, err := unix.Open(dest, dirFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dest, err)
	}
	if opts.modeOf == nil {
		opts.modeOf = func(h *tar.Header) uint32 { return uint32(h.Mode) & 0o7777 }
	}
	t := &tree{root: fd, opts: opts, buf: make([]byte, 256<<10), umask: processUmask(),
		euid: os.Geteuid(), egid: os.Getegid(), dirs: map[string]dirMeta{}}
	t.isRoot = t.euid == 0
	t.w.root, t.aux.root = fd, fd
	return t, nil
}

var umaskOnce = sync.OnceValue(func() uint32 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0o777 // unknown: every mode is set explicitly
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(m)
			}
		}
	}
	return 0o777
})

func processUmask() uint32 { return umaskOnce() }

func (t *tree) close() {
	t.w.close()
	t.aux.close()
	if t.root >= 0 {
		unix.Close(t.root)
		t.root = -1
	}
}

// owner returns the owner of an entry and whether a chown is needed.
func (t *tree) owner(hdr *tar.Header) (int, int, bool) {
	if t.opts.headerOwners {
		return hdr.Uid, hdr.Gid, hdr.Uid != t.euid || hdr.Gid != t.egid
	}
	uid, gid := t.opts.uid, t.opts.gid
	if uid < 0 {
		uid = t.euid
	}
	if gid < 0 {
		gid = t.egid
	}
	return uid, gid, uid != t.euid || gid != t.egid
}

// entry writes one entry at parts (already cleaned and checked). link is
// the cleaned hard link target.
func (t *tree) entry(parts []string, hdr *tar.Header, r io.Reader, link []string) error {
	if len(parts) == 0 {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the top is not a directory", ErrUnsafe)
		}
		t.dirs[""] = t.meta(hdr)
		return nil
	}
	pfd, err := t.w.open(parts[:len(parts)-1], true)
	if err != nil {
		return err
	}
	name := parts[len(parts)-1]
	switch hdr.Typeflag {
	case tar.TypeDir:
		return t.dir(pfd, name, parts, hdr)
	case tar.TypeReg:
		return t.file(pfd, name, parts, hdr, r)
	case tar.TypeSymlink:
		return t.symlink(pfd, name, parts, hdr)
	case tar.TypeLink:
		return t.hardlink(pfd, name, parts, link)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if !t.opts.specials {
			return fmt.Errorf("%w: device or fifo", ErrUnsafe)
		}
		return t.special(pfd, name, parts, hdr)
	}
	return fmt.Errorf("%w: unsupported entry type %q", ErrUnsafe, hdr.Typeflag)
}

// create runs mk; when the name is taken, it removes what is there (a
// whole tree for a directory) and runs mk once more. A fresh destination
// never pays for the removal.
func (t *tree) create(pfd int, name string, parts []string, mk func() error) error {
	err := mk()
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	if err := t.removeAt(pfd, name, parts); err != nil {
		return err
	}
	return mk()
}

func (t *tree) dir(pfd int, name string, parts []string, hdr *tar.Header) error {
	err := unix.Mkdirat(pfd, name, 0o700|t.opts.modeOf(hdr)&0o777)
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err = t.create(pfd, name, parts, func() error { return unix.Mkdirat(pfd, name, 0o700) })
		} else {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	t.dirs[strings.Join(parts, "/")] = t.meta(hdr)
	return nil
}

func (t *tree) meta(hdr *tar.Header) dirMeta {
	uid, gid, _ := t.owner(hdr)
	m := dirMeta{mode: t.opts.modeOf(hdr), uid: uid, gid: gid, mtime: timespec(hdr.ModTime), atime: atimeOf(hdr)}
	if hasXattrs(hdr) {
		m.paxRecords = hdr.PAXRecords
	}
	return m
}

func (t *tree) file(pfd int, name string, parts []string, hdr *tar.Header, r io.Reader) error {
	mode := t.opts.modeOf(hdr)
	var fd int
	err := t.create(pfd, name, parts, func() error {
		var err error
		fd, err = unix.Openat(pfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode&0o777)
		return err
	})
	if err != nil {
		return err
	}
	err = t.fill(fd, hdr.Size, r)
	if err == nil {
		err = t.fdMeta(fd, hdr, mode)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// fill copies size bytes of r into fd.
func (t *tree) fill(fd int, size int64, r io.Reader) error {
	var n int64
	for n < size {
		m, err := r.Read(t.buf[:min(int64(len(t.buf)), size-n)])
		for b := t.buf[:m]; len(b) > 0; {
			w, werr := unix.Write(fd, b)
			if werr != nil {
				return fmt.Errorf("writing: %w", werr)
			}
			b = b[w:]
		}
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
	}
	if n != size {
		return fmt.Errorf("short entry: %d of %d bytes", n, size)
	}
	t.bytes += n
	return nil
}

// fdMeta sets owner, mode, extended attributes and times on an open file
// or directory, skipping the calls that would change nothing.
func (t *tree) fdMeta(fd int, hdr *tar.Header, mode uint32) error {
	uid, gid, chown := t.owner(hdr)
	if chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("setting owner: %w", err)
		}
	}
	// A chown clears set-id bits, so it comes first; the open applied the
	// umask, so the mode is set again unless the umask removed nothing.
	if chown || mode&0o7000 != 0 || mode&t.umask != 0 {
		if err := unix.Fchmod(fd, mode); err != nil {
			return fmt.Errorf("setting mode: %w", err)
		}
	}
	if err := t.setXattrs(fd, hdr.PAXRecords); err != nil {
		return err
	}
	return futimens(fd, atimeOf(hdr), timespec(hdr.ModTime))
}

func (t *tree) setXattrs(fd int, pax map[string]string) error {
	for k, v := range pax {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		if !t.isRoot && !strings.HasPrefix(name, "user.") {
			continue // other namespaces need privilege
		}
		err := unix.Fsetxattr(fd, name, []byte(v), 0)
		if err != nil && !(t.opts.lenientXattrs && (errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPERM))) {
			return fmt.Errorf("setting extended attribute %s: %w", name, err)
		}
	}
	return nil
}

func hasXattrs(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, paxXattr) {
			return true
		}
	}
	return false
}

func (t *tree) symlink(pfd int, name string, parts []string, hdr *tar.Header) error {
	err := t.create(pfd, name, parts, func() error { return unix.Symlinkat(hdr.Linkname, pfd, name) })
	if err != nil {
		return err
	}
	if uid, gid, chown := t.owner(hdr); chown {
		if err := unix.Fchownat(pfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting owner: %w", err)
		}
	}
	ts := []unix.Timespec{atimeOf(hdr), timespec(hdr.ModTime)}
	return unix.UtimesNanoAt(pfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func (t *tree) hardlink(pfd int, name string, parts, link []string) error {
	if slices.Equal(parts, link) {
		return nil
	}
	tfd, err := t.aux.open(link[:len(link)-1], false)
	if err != nil {
		return err
	}
	return t.create(pfd, name, parts, func() error {
		return unix.Linkat(tfd, link[len(link)-1], pfd, name, 0)
	})
}

func (t *tree) special(pfd int, name string, parts []string, hdr *tar.Header) error {
	mode := t.opts.modeOf(hdr)
	typ := uint32(unix.S_IFIFO)
	switch hdr.Typeflag {
	case tar.TypeChar:
		typ = unix.S_IFCHR
	case tar.TypeBlock:
		typ = unix.S_IFBLK
	}
	dev := int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))
	if err := t.create(pfd, name, parts, func() error { return unix.Mknodat(pfd, name, typ|mode&0o777, dev) }); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// An O_PATH descriptor takes no fchown or fchmod; its /proc name does
	// and cannot be swapped for a symlink.
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if uid, gid, chown := t.owner(hdr); chown {
		if err := os.Lchown(proc, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Chmod(proc, os.FileMode(mode&0o777)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(pfd, name, []unix.Timespec{atimeOf(hdr), timespec(hdr.ModTime)}, unix.AT_SYMLINK_NOFOLLOW)
}

// removeAt removes name (a whole tree for a directory) from the directory
// pfd, whose path is parts minus the last.
func (t *tree) removeAt(pfd int, name string, parts []string) error {
	t.w.forget(parts)
	t.aux.forget(parts)
	err := unix.Unlinkat(pfd, name, 0)
	if errors.Is(err, unix.EISDIR) {
		t.forgetDirs(parts)
		err = removeTree(pfd, name)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %q: %w", strings.Join(parts, "/"), err)
	}
	return nil
}

// forgetDirs drops the metadata of parts and every directory below it.
func (t *tree) forgetDirs(parts []string) {
	p := strings.Join(parts, "/")
	delete(t.dirs, p)
	for k := range t.dirs {
		if strings.HasPrefix(k, p+"/") {
			delete(t.dirs, k)
		}
	}
}

// removeTree removes the directory name of pfd and everything below it,
// never following a symlink.
func removeTree(pfd int, name string) error {
	fd, err := unix.Openat(pfd, name, dirFlags, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	ents, err := d.ReadDir(-1)
	if err == nil {
		for _, e := range ents {
			if e.IsDir() {
				err = removeTree(fd, e.Name())
			} else {
				err = unix.Unlinkat(fd, e.Name(), 0)
			}
			if err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
}

// finish applies directory metadata, deepest first, once nothing below a
// directory changes any more.
func (t *tree) finish() error {
	paths := make([]string, 0, len(t.dirs))
	for p := range t.dirs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range slices.Backward(paths) {
		var parts []string
		if p != "" {
			parts = strings.Split(p, "/")
		}
		fd, err := t.aux.open(parts, false)
		if err != nil {
			return err
		}
		if err := t.dirMetaAt(fd, t.dirs[p], p == ""); err != nil {
			return fmt.Errorf("directory %q: %w", p, err)
		}
	}
	t.aux.close()
	return nil
}

func (t *tree) dirMetaAt(fd int, m dirMeta, top bool) error {
	chown := m.uid != t.euid || m.gid != t.egid
	if chown {
		if err := unix.Fchown(fd, m.uid, m.gid); err != nil {
			return fmt.Errorf("setting owner: %w", err)
		}
	}
	// mkdir gave it (0700|mode)&^umask; set the mode only if that differs
	// (the top was not made by us).
	if top || chown || (0o700|m.mode&0o777)&^t.umask != m.mode {
		if err := unix.Fchmod(fd, m.mode); err != nil {
			return fmt.Errorf("setting mode: %w", err)
		}
	}
	if err := t.setXattrs(fd, m.paxRecords); err != nil {
		return err
	}
	return futimens(fd, m.atime, m.mtime)
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	}
	return unix.NsecToTimespec(t.UnixNano())
}

// atimeOf is the entry's access time, or its modification time when the
// archive has none (as GNU tar restores it).
func atimeOf(hdr *tar.Header) unix.Timespec {
	if !hdr.AccessTime.IsZero() {
		return timespec(hdr.AccessTime)
	}
	return timespec(hdr.ModTime)
}

// futimens sets the times of an open file (utimensat with a NULL path).
func futimens(fd int, atime, mtime unix.Timespec) error {
	ts := [2]unix.Timespec{atime, mtime}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return fmt.Errorf("setting times: %w", e)
	}
	return nil
}
