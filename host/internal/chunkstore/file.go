package chunkstore

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// hashedFile is a file being written under a temp name in one of the
// store's directories and published under the hash of its content.
type hashedFile struct {
	f   *os.File
	bw  *bufio.Writer
	h   hash.Hash
	dir string
	n   int64
}

func createHashed(dir string) (*hashedFile, error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("creating a file in %s: %w", dir, err)
	}
	return &hashedFile{f: f, bw: bufio.NewWriterSize(f, 1<<20), h: sha256.New(), dir: dir}, nil
}

func (hf *hashedFile) Write(p []byte) (int, error) {
	n, err := hf.bw.Write(p)
	hf.h.Write(p[:n])
	hf.n += int64(n)
	return n, err
}

// publish syncs the file, makes it read-only and renames it to
// <sha256><ext>, then syncs the directory. The same content always gets
// the same name, so replacing an existing file changes nothing.
func (hf *hashedFile) publish(ext string) (ID, error) {
	var id ID
	copy(id[:], hf.h.Sum(nil))
	if err := hf.bw.Flush(); err != nil {
		return id, hf.fail(err)
	}
	if err := hf.f.Chmod(0o400); err != nil {
		return id, hf.fail(err)
	}
	if err := hf.f.Sync(); err != nil {
		return id, hf.fail(err)
	}
	if err := hf.f.Close(); err != nil {
		return id, hf.fail(err)
	}
	crashPoint("before-rename-" + ext)
	if err := os.Rename(hf.f.Name(), filepath.Join(hf.dir, id.String()+ext)); err != nil {
		return id, hf.fail(err)
	}
	return id, atomicfile.SyncDir(hf.dir)
}

// fail removes the temp file and returns err, wrapped.
func (hf *hashedFile) fail(err error) error {
	hf.remove()
	return fmt.Errorf("writing %s: %w", hf.f.Name(), err)
}

func (hf *hashedFile) remove() {
	_ = hf.f.Close()
	_ = os.Remove(hf.f.Name())
}

// crashPoint, when set (tests only), is called at each named step.
var crashPoint = func(string) {}

// readFull reads exactly len(p) bytes at off.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	_, err := r.ReadAt(p, off)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
