package boot

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

var seedIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// seedStaging prefixes the directory a seed is unpacked into before its
// entries are moved into the workspace.
const seedStaging = ".hermes-box-seed-"

// workspaceSeed applies the seed archive packed into the image
// (workspace-seed.tar, plain or gzip, with its id beside it) by id, as the
// reference's workspace-seed script does: when the id recorded in the
// workspace differs (or none is), every top-level entry of the workspace
// is replaced by the seed's, except the user's work/, which is never
// touched once it exists; the same id is a no-op. The id is recorded last,
// so an interrupted seed is redone on the next boot.
func workspaceSeed(ctx context.Context, o *Options) (string, error) {
	idBytes, err := os.ReadFile(o.path(boxlayout.SeedID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", skipped("no workspace seed in the image")
	}
	if err != nil {
		return "", err
	}
	id, err := parseSeedID(idBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", boxlayout.SeedID, err)
	}
	prev := ""
	if cur, err := os.ReadFile(o.path(boxlayout.RestoredID)); err == nil {
		prev = strings.TrimSpace(string(cur))
		if prev == id {
			return "", skipped("workspace already seeded from " + id)
		}
	}
	ws := o.path(boxlayout.Workspace)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	n, kept, err := extractSeed(ctx, o.path(boxlayout.SeedArchive), ws)
	if err != nil {
		return "", fmt.Errorf("seeding the workspace from %s: %w", boxlayout.SeedArchive, err)
	}
	if err := atomicfile.Write(o.path(boxlayout.RestoredID), []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("workspace seeded from %s (%d entries)", id, n)
	if prev != "" {
		msg = fmt.Sprintf("workspace reseeded from %s, replacing %s (%d entries)", id, prev, n)
	}
	if kept {
		msg += "; work/ kept as it was"
	}
	return msg, nil
}

// parseSeedID accepts an id followed by exactly one newline.
func parseSeedID(b []byte) (string, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || !seedIDPattern.MatchString(s) {
		return "", fmt.Errorf("bad seed id %q: want 1-128 of [A-Za-z0-9._-], starting alphanumeric, and one newline", truncate(string(b)))
	}
	return s, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// keepOnReseed are the workspace's top-level entries a seed never replaces.
var keepOnReseed = map[string]bool{"lost+found": true, "work": true}

// extractSeed unpacks the archive into a staging directory inside ws, then
// replaces ws's top-level entries with the staged ones, keeping work/ and
// lost+found; stale staging directories of an interrupted seed go first.
// It returns the entry count and whether an existing work/ was kept.
func extractSeed(ctx context.Context, archive, ws string) (int, bool, error) {
	if err := removeStaging(ws); err != nil {
		return 0, false, err
	}
	f, err := os.Open(archive)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	staging, err := os.MkdirTemp(ws, seedStaging)
	if err != nil {
		return 0, false, err
	}
	defer os.RemoveAll(staging)
	r, err := maybeGunzip(f)
	if err != nil {
		return 0, false, err
	}
	n, err := untar(ctx, r, staging)
	if err != nil {
		return n, false, err
	}
	kept, err := replaceTop(ws, staging)
	return n, kept, err
}

func removeStaging(ws string) error {
	ents, err := os.ReadDir(ws)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), seedStaging) {
			if err := os.RemoveAll(filepath.Join(ws, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaceTop removes ws's top-level entries (but the kept ones and the
// staging directory) and moves staging's entries in.
func replaceTop(ws, staging string) (bool, error) {
	ents, err := os.ReadDir(ws)
	if err != nil {
		return false, err
	}
	kept := false
	for _, e := range ents {
		name := e.Name()
		if keepOnReseed[name] || filepath.Join(ws, name) == staging {
			kept = kept || name == "work"
			continue
		}
		if err := os.RemoveAll(filepath.Join(ws, name)); err != nil {
			return kept, err
		}
	}
	staged, err := os.ReadDir(staging)
	if err != nil {
		return kept, err
	}
	for _, e := range staged {
		if keepOnReseed[e.Name()] {
			if _, err := os.Lstat(filepath.Join(ws, e.Name())); err == nil {
				continue
			}
		}
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(ws, e.Name())); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		return gzip.NewReader(br)
	}
	return br, nil
}

// untar extracts a tar stream into dir with tarfs.Extract, so no entry can
// land outside it, and refuses names that try. Owners are kept when running
// as root; directory modes are applied last.
func untar(ctx context.Context, r io.Reader, dir string) (int, error) {
	res, err := tarfs.Extract(ctx, r, dir, tarfs.Options{HeaderOwners: os.Geteuid() == 0, UID: -1, GID: -1})
	if err != nil {
		return res.Entries, fmt.Errorf("the seed archive: %w", err)
	}
	return res.Entries, nil
}
