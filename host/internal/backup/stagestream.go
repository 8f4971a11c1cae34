package backup

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/klauspost/pgzip"
)

// TarSource streams one part as a tar archive that is not compressed to
// w: an incremental backup's tree, decoded from its chunk store.
type TarSource func(ctx context.Context, part string, w io.Writer) error

// StageStream stages a backup streamed from src in one pass, as Stage
// stages a v2 backup but with nothing written and read again first: each
// part is listed (within meta.Limits) as it streams, compressed (parallel
// gzip, the format `snapshot apply` reads) and hashed into a new directory
// below stateDir, the part cap and the free space checked as it goes;
// then the workspace content rules, the rootfs listing and the manifest of
// meta (its audit anchor one line), and SHA256SUMS signed by meta.Signer,
// the staged form WriteApply, WriteExport and the package read. On
// failure nothing is left; after a crash Reap removes the directory.
func StageStream(ctx context.Context, stateDir string, meta Meta, src TarSource) (s *Staged, err error) {
	if err := meta.checkSigned(); err != nil {
		return nil, err
	}
	lim := meta.Limits.withDefaults()
	dir, err := newStageDir(stateDir, func() error {
		if err := lim.checkFree(stateDir); err != nil {
			return fmt.Errorf("staging backup: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = removeStaged(dir)
		}
	}()
	sums, sizes, listings := Sums{}, map[string]int64{}, map[string][]string{}
	for _, p := range Parts {
		fill := func(w io.Writer) error { return src(ctx, p.Name, w) }
		pw := &partWriter{lim: lim, dir: stateDir, part: p.Name}
		sum, names, err := compressPart(ctx, filepath.Join(dir, p.File), lim, pw, fill)
		if err != nil {
			return nil, fmt.Errorf("staging %s: %w", p.Name, err)
		}
		sums[p.File], sizes[p.File], listings[p.Name] = sum, pw.n, names
		crashPoint(p.Name + "-staged")
	}
	m, err := writeMeta(dir, meta, sums, sizes, listings)
	if err != nil {
		return nil, fmt.Errorf("staging backup: %w", err)
	}
	if err := seal(dir, append([]string{FileSums, FileSignature}, Files...)); err != nil {
		return nil, err
	}
	return &Staged{Verified: Verified{Dir: dir, Manifest: m, Sums: sums, Sizes: sizes, Signer: meta.Signer.PublicKey()}}, nil
}

// compressPart creates path (0600, never an existing file) and fills it
// with the gzip of the tar fill writes (parallel gzip, fastest level),
// listing the tar on the way (every entry's name checked and bounded as
// listArchive checks them) and hashing the compressed bytes, which go
// through pw (pw.w is set here).
func compressPart(ctx context.Context, path string, lim Limits, pw *partWriter, fill func(io.Writer) error) (sum string, names []string, err error) {
	list := func(r io.Reader) ([]string, error) { return listTar(ctxReader{ctx, r}, lim) }
	return writeListed(path, list, func(out, listed io.Writer) error {
		pw.w = out
		zw, err := pgzip.NewWriterLevel(pw, pgzip.BestSpeed)
		if err != nil {
			return err
		}
		err = fill(io.MultiWriter(listed, zw))
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		return err
	})
}
