package snapshot

import (
	"bufio"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/chunkwire"
)

// The chunk cache says, for each regular file of a part's last snapshot,
// its identity and times and the chunk ids of its content, so the next
// snapshot need not read a file that did not change. There is one cache
// file per snapshot, named by the token of that snapshot's tree
// (chunkwire.Token): the agent writes it when its stream ends, and uses
// it only once the host names that token as its last committed backup of
// the part. An aborted snapshot's cache is never named, so it never
// poisons a later one; and a cached file is taken only when every one of
// its chunks is among those the host says it holds.

// fileKey is what must not change for a cached file to be taken.
type fileKey struct {
	Size, Mtime, Ctime int64
	Ino, Dev           uint64
}

// cacheEntry is one file of the cache, as written.
type cacheEntry struct {
	Name string
	Key  fileKey
	IDs  []byte
}

// cache maps entry names to their identity and chunks.
type cache map[string]cacheEntry

func keyOf(fi os.FileInfo) fileKey {
	st := statOf(fi)
	return fileKey{Size: fi.Size(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: uint64(st.Ino), Dev: uint64(st.Dev)}
}

func cachePath(dir, part string, token chunkwire.ID) string {
	return filepath.Join(dir, part+"-"+hex.EncodeToString(token[:]))
}

// loadCache reads the cache of part's committed snapshot; none (an empty
// cache) when there is no token, no such file or it does not decode.
func loadCache(dir, part string, token chunkwire.ID) cache {
	c := cache{}
	if token == (chunkwire.ID{}) {
		return c
	}
	f, err := os.Open(cachePath(dir, part, token))
	if err != nil {
		return c
	}
	defer f.Close()
	dec := gob.NewDecoder(bufio.NewReader(f))
	for {
		var e cacheEntry
		if err := dec.Decode(&e); err != nil {
			if !errors.Is(err, io.EOF) {
				return cache{} // a damaged cache is no cache: every file is read
			}
			return c
		}
		c[e.Name] = e
	}
}

// saveCache writes c as the cache of token and removes part's other
// caches but keep's: the committed one stays until the host names the
// new one.
func saveCache(dir, part string, token, keep chunkwire.ID, c cache) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing the chunk cache: %w", err)
	}
	err := atomicfile.WriteFrom(cachePath(dir, part, token), func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := gob.NewEncoder(bw)
		for _, e := range c {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return bw.Flush()
	}, 0o600)
	if err != nil {
		return fmt.Errorf("writing the chunk cache: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("writing the chunk cache: %w", err)
	}
	for _, n := range names {
		if !strings.HasPrefix(n.Name(), part+"-") {
			continue
		}
		p := filepath.Join(dir, n.Name())
		if p == cachePath(dir, part, token) || p == cachePath(dir, part, keep) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing an old chunk cache: %w", err)
		}
	}
	return nil
}
