package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// rotator is an io.WriteCloser that keeps a log file below a size limit by
// renaming it to path.1 (path.1 to path.2, …, dropping path.N) before a write
// would cross the limit, as supervisord rotates. It starts no goroutine and
// holds one file descriptor.
type rotator struct {
	mu      sync.Mutex
	path    string
	max     int64
	backups int
	f       *os.File
	size    int64
	closed  bool
}

// logMode is the mode of new log files: logs may carry what a program
// prints, so only root reads them.
const logMode = 0o600

func openRotator(l Log) (*rotator, error) {
	r := &rotator{path: l.Path, max: l.MaxBytes, backups: l.Backups}
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
		return nil, fmt.Errorf("creating log directory: %w", err)
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotator) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, logMode)
	if err != nil {
		return fmt.Errorf("opening log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening log: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p. When p would cross the limit it is cut after the last
// newline that fits (or at the limit, for a line longer than it), and the
// rest goes to a fresh file after rotation, so no file exceeds the limit.
func (r *rotator) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	written := 0
	for len(p) > 0 {
		if r.f == nil { // a failed rotation left no file: try again
			if err := r.open(); err != nil {
				return written, err
			}
		}
		chunk := p
		if room := r.max - r.size; r.max > 0 && int64(len(p)) > room {
			cut := 0
			if room > 0 {
				cut = bytes.LastIndexByte(p[:room], '\n') + 1
			}
			if cut == 0 && r.size > 0 {
				if err := r.rotate(); err != nil {
					return written, err
				}
				continue
			}
			if cut == 0 {
				cut = int(room)
			}
			chunk = p[:cut]
		}
		n, err := r.f.Write(chunk)
		r.size += int64(n)
		written += n
		p = p[n:]
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// rotate shifts the backups and starts an empty file. With no backups the
// file is truncated.
func (r *rotator) rotate() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("rotating log %s: %w", r.path, err)
	}
	r.f = nil
	if r.backups == 0 {
		if err := os.Truncate(r.path, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating log %s: %w", r.path, err)
		}
		return r.open()
	}
	for i := r.backups - 1; i >= 1; i-- {
		err := os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating log %s: %w", r.path, err)
		}
	}
	if err := os.Rename(r.path, r.path+".1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotating log %s: %w", r.path, err)
	}
	return r.open()
}

// Close closes the file; later writes fail.
func (r *rotator) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
