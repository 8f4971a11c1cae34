package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// verdictFormat names the cache record's layout and the key's recipe; a
// change to either must change it, so an old record never matches.
const verdictFormat = "hermes-box gate verdict v2"

// Bounds of what one key may read: past them the state is not cached (the
// probe runs, as without a cache), so a file or tree the hermes user makes
// huge costs neither memory nor more than this much reading.
const (
	keyMaxBytes   = 16 << 20
	keyMaxEntries = 10000
	keyMaxDepth   = 32
	verdictMax    = 1 << 20
)

// homeInputs are the files and trees of HERMES_HOME (the hermes user's)
// that decide how Hermes resolves the approval settings: its config, its
// environment (.env, then .op.env), its user plugins and the install-mode
// stamps hermes_cli.config reads.
var homeInputs = []string{"config.yaml", ".env", ".op.env", "plugins", ".managed", ".container-mode", ".install_method"}

// VerdictCache is the root-owned file keeping the probe's last verdict,
// keyed by a hash of everything that answer depends on: a health check
// with nothing changed reads it instead of starting Python.
type VerdictCache struct {
	Path string
	// AnchorsPath keeps the last verification of the tree's gate edits
	// that passed (anchors.go), by the same rules; "" keeps none.
	AnchorsPath string
	// Owner is the only account whose cache file is trusted (the agent's,
	// root in the box); a file of anyone else, or one others may write, is
	// ignored.
	Owner int
}

// NewVerdictCache is the cache at path, with the anchors' record at
// anchors, trusted when the running account owns them.
func NewVerdictCache(path, anchors string) *VerdictCache {
	return &VerdictCache{Path: path, AnchorsPath: anchors, Owner: os.Geteuid()}
}

type verdictRecord struct {
	Format    string    `json:"format"`
	Key       string    `json:"key"`
	Effective Effective `json:"effective"`
}

// probeCached answers like Probe, from t.Verdicts when nothing the answer
// depends on has changed since it was stored. A state it cannot key
// safely (a symlink, an oversized input) is probed every time. The key
// takes the digest of a file seen already read (nil: none).
func probeCached(ctx context.Context, t Target, rel pins.HermesRelease, seen *inputs) (Effective, error) {
	if t.Verdicts == nil {
		return Probe(ctx, t, rel)
	}
	before := verdictKey(t, rel, seen)
	if before.ok {
		if eff, ok := t.Verdicts.load(before.key); ok {
			return eff, nil
		}
	}
	return probeAndStore(ctx, t, rel, before)
}

// probeFresh always runs the probe (after an install) and keeps its answer
// in t.Verdicts.
func probeFresh(ctx context.Context, t Target, rel pins.HermesRelease) (Effective, error) {
	if t.Verdicts == nil {
		return Probe(ctx, t, rel)
	}
	return probeAndStore(ctx, t, rel, verdictKey(t, rel, nil))
}

// probeAndStore runs the probe and keeps its answer when every input is
// as it was before, down to inode and ctime (which no write can set
// back), each file read again: a change while Python ran (the hermes user
// swapping a file in and back) must not file one state's answer under
// another's key.
func probeAndStore(ctx context.Context, t Target, rel pins.HermesRelease, before keyed) (Effective, error) {
	eff, err := Probe(ctx, t, rel)
	if err != nil || !before.ok {
		return eff, err
	}
	if after := verdictKey(t, rel, nil); after == before {
		t.Verdicts.store(before.key, eff)
	}
	return eff, nil
}

func (c *VerdictCache) load(key string) (Effective, bool) {
	var rec verdictRecord
	if !c.read(c.Path, &rec) || rec.Format != verdictFormat || rec.Key != key {
		return Effective{}, false
	}
	return rec.Effective, true
}

// store keeps the verdict; failing to is no error of the health check
// (the next one probes again).
func (c *VerdictCache) store(key string, eff Effective) {
	c.write(c.Path, verdictRecord{Format: verdictFormat, Key: key, Effective: eff})
}

// read decodes the record at path into rec when the file is the owner's
// alone: a regular file (never through a symlink, never blocking), no one
// else may write, at most verdictMax bytes.
func (c *VerdictCache) read(path string, rec any) bool {
	f, fi, err := openRegular(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi.Mode().Perm()&0o022 != 0 || fi.Size() > verdictMax {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != c.Owner {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, verdictMax))
	return err == nil && json.Unmarshal(b, rec) == nil
}

// write replaces the record at path atomically, mode 0600; failing to is
// no error of the health check (the next one asks again).
func (c *VerdictCache) write(path string, rec any) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	_ = atomicfile.Write(path, b, 0o600)
}

// keyed is the verdict key of a state: key, the SHA-256 of the contents,
// types, modes and owners of everything the probe's answer depends on (the
// same in a copy of the box, so a restored or repacked box keeps its
// verdict); stamp, of the same entries' inodes and ctimes, which tells a
// state from an identical-looking one written in between; ok false when
// some input cannot be keyed safely.
type keyed struct {
	key, stamp string
	ok         bool
}

func verdictKey(t Target, rel pins.HermesRelease, seen *inputs) keyed {
	k := keyHasher{h: sha256.New(), stamps: sha256.New(), budget: keyMaxBytes, seen: seen}
	k.str(verdictFormat)
	k.str(string(probeScript))
	k.str(rel.Version, rel.Commit, string(rel.Mechanism), t.Source, t.Home, t.Managed, t.User, t.Python)
	k.path(t.Python, 0)
	k.walk(t.Managed, 0)
	k.str(t.WorkDir)
	for _, name := range []string{patch.SourceMarker, patch.MarkerFile, patch.ManagedPointer, PluginDir} {
		k.walk(filepath.Join(t.Source, name), 0)
	}
	if reqs, err := Requirements(rel); err == nil {
		var files []string
		for _, r := range reqs {
			files = append(files, r.File)
		}
		slices.Sort(files)
		for _, f := range slices.Compact(files) {
			k.walk(filepath.Join(t.Source, filepath.FromSlash(f)), 0)
		}
	} else {
		k.refuse()
	}
	for _, name := range homeInputs {
		k.walk(filepath.Join(t.Home, name), 0)
	}
	if k.refused {
		return keyed{}
	}
	return keyed{key: hex.EncodeToString(k.h.Sum(nil)), stamp: hex.EncodeToString(k.stamps.Sum(nil)), ok: true}
}

// keyHasher feeds a key: length-prefixed strings, and file system entries
// by type, mode and owner, with the digest of regular files' contents; and
// their stamp. A file seen holds is not read again.
type keyHasher struct {
	h       hash.Hash
	stamps  hash.Hash
	budget  int64
	entries int
	refused bool
	seen    *inputs
}

func (k *keyHasher) refuse() { k.refused = true }

func (k *keyHasher) str(ss ...string) {
	for _, s := range ss {
		fmt.Fprintf(k.h, "%d:", len(s))
		io.WriteString(k.h, s)
	}
}

// path keys an interpreter path through its chain of symlinks (root's, in
// the venv), each link by its text, each by size and mtime (an upgrade of
// the interpreter changes them).
func (k *keyHasher) path(p string, hops int) {
	fi, err := os.Lstat(p)
	if err != nil || hops > 8 {
		k.str("unresolved", p)
		return
	}
	k.meta(p, fi)
	fmt.Fprintf(k.h, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			k.refuse()
			return
		}
		k.str(target)
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		k.path(target, hops+1)
	}
}

func (k *keyHasher) meta(p string, fi fs.FileInfo) {
	k.str(p, fi.Mode().String())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fmt.Fprintf(k.h, "%d/%d;", st.Uid, st.Gid)
		fmt.Fprintf(k.stamps, "%s:%d/%d/%d.%d;", p, st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
}

// walk keys the entry at p without following symlinks: a directory by its
// sorted entries, recursively; a regular file by its contents, streamed.
// A symlink makes the state uncacheable (its target can change while the
// link does not), and so does a FIFO, device or socket, never opened (what
// Hermes reads from one need not be what it read last time).
func (k *keyHasher) walk(p string, depth int) {
	if k.refused {
		return
	}
	k.entries++
	if k.entries > keyMaxEntries || depth > keyMaxDepth {
		k.refuse()
		return
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		k.str("absent", p)
		return
	}
	if err != nil {
		k.refuse()
		return
	}
	k.meta(p, fi)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		k.refuse()
	case fi.IsDir():
		names, err := readNames(p)
		if err != nil {
			k.refuse()
			return
		}
		for _, n := range names {
			k.walk(filepath.Join(p, n), depth+1)
		}
	case fi.Mode().IsRegular():
		k.contents(p, fi)
	default:
		k.refuse()
	}
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(keyMaxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// contents keys a regular file by the SHA-256 of its contents: the one
// k.seen holds of the same file, else streamed. It opens without following
// a link and without blocking (a FIFO swapped in after Lstat), and refuses
// when what it opened is not what Lstat saw or the budget runs out.
func (k *keyHasher) contents(p string, want fs.FileInfo) {
	if sum, n, ok := k.seen.digest(p, want); ok {
		k.digest(sum, n)
		return
	}
	f, fi, err := openRegular(p)
	if err != nil {
		k.refuse()
		return
	}
	defer f.Close()
	if !os.SameFile(fi, want) {
		k.refuse()
		return
	}
	d := sha256.New()
	n, err := io.Copy(d, io.LimitReader(f, k.budget+1))
	if err != nil {
		k.refuse()
		return
	}
	k.digest(d.Sum(nil), n)
}

// digest keys a file's contents: their SHA-256 and length, counted
// against the budget.
func (k *keyHasher) digest(sum []byte, n int64) {
	fmt.Fprintf(k.h, "%x#%d;", sum, n)
	k.budget -= n
	if k.budget < 0 {
		k.refuse()
	}
}

// openRegular opens the file at p for reading without following a link
// and without blocking (a FIFO swapped in after an Lstat), and returns it
// with what it is as opened; anything but a regular file is an error.
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errUnreadable
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	return f, fi, nil
}
