package tarfs

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is returned for an entry that would write outside the
// destination or through a symlink or non-directory on disk.
var ErrUnsafe = errors.New("unsafe archive entry")

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// walker holds open the directories from the root down to the last
// directory asked for. Each component is opened relative to its parent with
// O_NOFOLLOW, so a symlink anywhere on the way is refused, never followed.
// Archives list entries directory by directory, so most lookups reuse the
// held descriptors and open nothing.
type walker struct {
	root  int
	names []string
	fds   []int
}

// open returns a descriptor of the directory parts (the root for none),
// creating missing directories (mode 0755) when mkdir is set. The
// descriptor stays owned by the walker.
func (w *walker) open(parts []string, mkdir bool) (int, error) {
	n := 0
	for n < len(parts) && n < len(w.names) && parts[n] == w.names[n] {
		n++
	}
	w.truncate(n)
	for i := n; i < len(parts); i++ {
		fd, err := w.openChild(w.top(), parts[i], mkdir)
		if err != nil {
			return -1, fmt.Errorf("opening directory %q: %w", strings.Join(parts[:i+1], "/"), err)
		}
		w.names = append(w.names, parts[i])
		w.fds = append(w.fds, fd)
	}
	return w.top(), nil
}

func (w *walker) openChild(parent int, name string, mkdir bool) (int, error) {
	for range 2 {
		fd, err := unix.Openat(parent, name, dirFlags, 0)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOENT) && mkdir:
			if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, err
			}
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return -1, fmt.Errorf("%w: a symlink or non-directory on the way", ErrUnsafe)
		default:
			return -1, err
		}
	}
	return -1, unix.ENOENT
}

// top is the descriptor of the deepest held directory.
func (w *walker) top() int {
	if len(w.fds) == 0 {
		return w.root
	}
	return w.fds[len(w.fds)-1]
}

// truncate closes held directories below depth n.
func (w *walker) truncate(n int) {
	for len(w.fds) > n {
		unix.Close(w.fds[len(w.fds)-1])
		w.fds = w.fds[:len(w.fds)-1]
		w.names = w.names[:len(w.names)-1]
	}
}

// forget drops held descriptors of parts and below, after parts was
// removed or replaced.
func (w *walker) forget(parts []string) {
	if len(parts) == 0 {
		w.truncate(0)
		return
	}
	for i := range parts {
		if i >= len(w.names) || w.names[i] != parts[i] {
			return
		}
	}
	w.truncate(len(parts) - 1)
}

func (w *walker) close() { w.truncate(0) }
