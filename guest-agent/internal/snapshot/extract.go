package snapshot

import (
	"context"
	"fmt"
	"io"

	"github.com/klauspost/pgzip"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
)

// ErrUnsafeEntry is returned for an archive entry that could write outside
// its destination: an absolute name, "..", a path through a symlink, or a
// hard link to something not extracted from the same archive.
var ErrUnsafeEntry = tarfs.ErrUnsafe

// extractOptions tune one extraction.
type extractOptions struct {
	// skip reports entries (relative slash paths) left out with everything
	// below them.
	skip func(rel string) bool
	// chown says whether owners are applied (only root may).
	chown bool
}

// extract unpacks the gzip tar r below dest with tarfs.Extract (owners,
// modes with set-id bits, extended attributes, times, devices and fifos)
// and returns the set of entries it contained (relative slash paths, ""
// for the top).
func extract(ctx context.Context, r io.Reader, dest string, opts extractOptions) (map[string]bool, error) {
	zr, err := pgzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading gzip: %w", err)
	}
	defer zr.Close()
	res, err := tarfs.Extract(ctx, zr, dest, tarfs.Options{Skip: opts.skip, HeaderOwners: opts.chown,
		UID: -1, GID: -1, Specials: true})
	if err != nil {
		return nil, err
	}
	// Drain gzip padding so the caller's reader is positioned after it.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, fmt.Errorf("reading archive end: %w", err)
	}
	return res.Listed, nil
}
