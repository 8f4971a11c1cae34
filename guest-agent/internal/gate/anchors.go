package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
)

// anchorsFormat names the anchors record's layout and its key's recipe; a
// change to either must change it, so an old record never matches.
const anchorsFormat = "hermes-box gate anchors v1"

// anchorsRecord says that the tree whose verification inputs hash to Key
// verified: its gate edits are in place, each anchor once.
type anchorsRecord struct {
	Format string `json:"format"`
	Key    string `json:"key"`
}

// markerProblems verifies the tree's gate edits without writing: a tree
// without the marker is reported, never patched from a health check. A
// tree whose files are, byte for byte, those that last verified is not
// verified again (t.Verdicts); seen keeps the files read, for the
// verdict's key.
func markerProblems(ctx context.Context, t Target, commit string, seen *inputs) []string {
	if _, err := os.Stat(filepath.Join(t.Source, patch.MarkerFile)); err != nil {
		return []string{"the gate's source edits are not in place (" + patch.MarkerFile + ": " + err.Error() + ")"}
	}
	rel, set, err := patch.CheckTree(t.Source, commit)
	if err != nil {
		return []string{err.Error()}
	}
	k := keyHasher{h: sha256.New()}
	k.str(anchorsFormat, t.Source, rel.Commit, set.ID, patch.ModuleSHA256())
	for _, a := range set.Anchors {
		k.str(a.File, a.Label, a.Before, a.Hunk, a.After, a.Marker)
	}
	files := map[string][]byte{}
	for _, f := range set.VerifyInputs() {
		data, sum, err := seen.read(filepath.Join(t.Source, filepath.FromSlash(f)))
		if err != nil {
			// A file that cannot be read safely and within bounds (a
			// symlink, a FIFO, a huge file) is verified as without a
			// cache, which names what is wrong.
			if _, err := (Installer{}).patcher(t).Patch(ctx, t.Source, commit); err != nil {
				return []string{err.Error()}
			}
			return nil
		}
		files[f] = data
		k.str(f)
		k.digest(sum[:], int64(len(data)))
	}
	key := hex.EncodeToString(k.h.Sum(nil))
	if t.Verdicts.anchorsVerified(key) {
		return nil
	}
	if err := patch.VerifyMarked(t.Source, rel, set, files); err != nil {
		return []string{err.Error()}
	}
	t.Verdicts.storeAnchors(key)
	return nil
}

func (c *VerdictCache) anchorsVerified(key string) bool {
	var rec anchorsRecord
	return c != nil && c.AnchorsPath != "" && c.read(c.AnchorsPath, &rec) && rec.Format == anchorsFormat && rec.Key == key
}

func (c *VerdictCache) storeAnchors(key string) {
	if c != nil && c.AnchorsPath != "" {
		c.write(c.AnchorsPath, anchorsRecord{Format: anchorsFormat, Key: key})
	}
}

// inputs are the files one health check read for the anchors'
// verification, each once, with their digests, which the verdict's key
// takes instead of reading them again.
type inputs struct {
	files  map[string]inputFile
	budget int64
}

type inputFile struct {
	fi   fs.FileInfo // of the file as opened
	data []byte
	sum  [sha256.Size]byte
}

func newInputs() *inputs { return &inputs{files: map[string]inputFile{}, budget: keyMaxBytes} }

var errUnreadable = errors.New("not a regular file within the key's bounds")

// read returns the bytes and digest of the regular file at p, read once:
// without following a link, without blocking, within the budget.
func (in *inputs) read(p string) ([]byte, [sha256.Size]byte, error) {
	if f, ok := in.files[p]; ok {
		return f.data, f.sum, nil
	}
	f, fi, err := openRegular(p)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	defer f.Close()
	// Sized as Stat says (a file that grows meanwhile still reads), so the
	// bytes held are the file's and no more.
	buf := bytes.NewBuffer(make([]byte, 0, min(fi.Size(), in.budget)+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(f, in.budget+1))
	data := buf.Bytes()
	if err != nil || int64(len(data)) > in.budget {
		return nil, [sha256.Size]byte{}, fmt.Errorf("%s: %w", p, errors.Join(err, errUnreadable))
	}
	in.budget -= int64(len(data))
	in.files[p] = inputFile{fi: fi, data: data, sum: sha256.Sum256(data)}
	return data, in.files[p].sum, nil
}

// digest is the digest and length of the file at p that read holds, when
// it is still the file Lstat described in want: the same file, size and
// modification time.
func (in *inputs) digest(p string, want fs.FileInfo) ([]byte, int64, bool) {
	if in == nil {
		return nil, 0, false
	}
	f, ok := in.files[p]
	if !ok || !os.SameFile(f.fi, want) || f.fi.Size() != want.Size() || !f.fi.ModTime().Equal(want.ModTime()) {
		return nil, 0, false
	}
	return f.sum[:], int64(len(f.data)), true
}
