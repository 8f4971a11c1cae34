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
const verdictFormat = "hermes-box gate verdict v1"

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
	// Owner is the only account whose cache file is trusted (the agent's,
	// root in the box); a file of anyone else, or one others may write, is
	// ignored.
	Owner int
}

// NewVerdictCache is the cache at path, trusted when the running account
// owns it.
func NewVerdictCache(path string) *VerdictCache {
	return &VerdictCache{Path: path, Owner: os.Geteuid()}
}

type verdictRecord struct {
	Format    string    `json:"format"`
	Key       string    `json:"key"`
	Effective Effective `json:"effective"`
}

// probeCached answers like Probe, from t.Verdicts when nothing the answer
// depends on has changed since it was stored. A state it cannot key
// safely (a symlink, an oversized input) is probed every time.
func probeCached(ctx context.Context, t Target, rel pins.HermesRelease) (Effective, error) {
	if t.Verdicts == nil {
		return Probe(ctx, t, rel)
	}
	before := verdictKey(t, rel)
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
	return probeAndStore(ctx, t, rel, verdictKey(t, rel))
}

// probeAndStore runs the probe and keeps its answer when every input is
// as it was before, down to inode and ctime (which no write can set
// back): a change while Python ran (the hermes user swapping a file in and
// back) must not file one state's answer under another's key.
func probeAndStore(ctx context.Context, t Target, rel pins.HermesRelease, before keyed) (Effective, error) {
	eff, err := Probe(ctx, t, rel)
	if err != nil || !before.ok {
		return eff, err
	}
	if after := verdictKey(t, rel); after == before {
		t.Verdicts.store(before.key, eff)
	}
	return eff, nil
}

func (c *VerdictCache) load(key string) (Effective, bool) {
	f, err := os.OpenFile(c.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Effective{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || fi.Size() > verdictMax {
		return Effective{}, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != c.Owner {
		return Effective{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, verdictMax))
	if err != nil {
		return Effective{}, false
	}
	var rec verdictRecord
	if json.Unmarshal(b, &rec) != nil || rec.Format != verdictFormat || rec.Key != key {
		return Effective{}, false
	}
	return rec.Effective, true
}

// store keeps the verdict; failing to is no error of the health check
// (the next one probes again).
func (c *VerdictCache) store(key string, eff Effective) {
	b, err := json.Marshal(verdictRecord{Format: verdictFormat, Key: key, Effective: eff})
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(c.Path), 0o700) != nil {
		return
	}
	_ = atomicfile.Write(c.Path, b, 0o600)
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

func verdictKey(t Target, rel pins.HermesRelease) keyed {
	k := keyHasher{h: sha256.New(), stamps: sha256.New(), budget: keyMaxBytes}
	k.str(verdictFormat)
	k.str(string(probeScript))
	k.str(rel.Version, rel.Commit, string(rel.Mechanism), t.Source, t.Home, t.Managed, t.User, t.Python)
	k.path(t.Python, 0)
	k.walk(t.Managed, 0)
	for _, name := range []string{patch.SourceMarker, patch.MarkerFile, PluginDir} {
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
// by type, mode and owner, with regular files' contents; and their stamp.
type keyHasher struct {
	h       hash.Hash
	stamps  hash.Hash
	budget  int64
	entries int
	refused bool
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

// contents streams a regular file into the key. It opens without following
// a link and without blocking (a FIFO swapped in after Lstat), and refuses
// when what it opened is not what Lstat saw or the budget runs out.
func (k *keyHasher) contents(p string, want fs.FileInfo) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		k.refuse()
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, want) {
		k.refuse()
		return
	}
	n, err := io.Copy(k.h, io.LimitReader(f, k.budget+1))
	fmt.Fprintf(k.h, "#%d;", n)
	k.budget -= n
	if err != nil || k.budget < 0 {
		k.refuse()
	}
}
