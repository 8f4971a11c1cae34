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
)

var seedIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// seedStaging prefixes the directory a seed is unpacked into before its
// entries are moved into the workspace.
const seedStaging = ".hermes-box-seed-"

// workspaceSeed fills a new workspace from the seed archive packed into the
// image (workspace-seed.tar, plain or gzip, with its id beside it). A
// workspace is new when it has never been seeded and holds nothing; a used
// workspace is never wiped. The id is recorded last, so an interrupted seed
// is redone on the next boot.
func workspaceSeed(ctx context.Context, o *Options) (string, error) {
	idBytes, err := os.ReadFile(o.path(SeedID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", skipped("no workspace seed in the image")
	}
	if err != nil {
		return "", err
	}
	id, err := parseSeedID(idBytes)
	if err != nil {
		return "", fmt.Errorf("/%s: %w", SeedID, err)
	}
	if cur, err := os.ReadFile(o.path(RestoredID)); err == nil {
		if strings.TrimSpace(string(cur)) == id {
			return "", skipped("workspace already seeded from " + id)
		}
		return "", skipped(fmt.Sprintf("workspace holds seed %s; seed %s not applied to a used workspace", strings.TrimSpace(string(cur)), id))
	}
	ws := o.path(Workspace)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	empty, err := workspaceIsNew(ws)
	if err != nil {
		return "", err
	}
	if !empty {
		return "", skipped("workspace is not empty; not seeding it")
	}
	n, err := extractSeed(ctx, o.path(SeedArchive), ws)
	if err != nil {
		return "", fmt.Errorf("seeding the workspace from /%s: %w", SeedArchive, err)
	}
	if err := atomicfile.Write(o.path(RestoredID), []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("workspace seeded from %s (%d entries)", id, n), nil
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

// workspaceIsNew reports whether ws holds nothing but lost+found and stale
// staging directories (which it removes).
func workspaceIsNew(ws string) (bool, error) {
	ents, err := os.ReadDir(ws)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		switch {
		case e.Name() == "lost+found":
		case strings.HasPrefix(e.Name(), seedStaging):
			if err := os.RemoveAll(filepath.Join(ws, e.Name())); err != nil {
				return false, err
			}
		default:
			return false, nil
		}
	}
	return true, nil
}

// extractSeed unpacks the archive into a staging directory inside ws, then
// moves its top-level entries into ws.
func extractSeed(ctx context.Context, archive, ws string) (int, error) {
	f, err := os.Open(archive)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	staging, err := os.MkdirTemp(ws, seedStaging)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(staging)
	r, err := maybeGunzip(f)
	if err != nil {
		return 0, err
	}
	n, err := untar(ctx, r, staging)
	if err != nil {
		return n, err
	}
	ents, err := os.ReadDir(staging)
	if err != nil {
		return n, err
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(ws, e.Name())); err != nil {
			return n, err
		}
	}
	return n, nil
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
