package backup

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/progress"
)

// ExportPrefix starts the name of an export: backups/hermes-box-export-
// <backup name>.tar and its .sha256.
const ExportPrefix = "hermes-box-export-"

// WriteExport writes the verified backup v as one file in backupsDir:
// a tar of the directory name (a backup's name, ending in Suffix) holding
// its files, published as ExportPrefix+name[-N].tar with its .sha256,
// never replacing anything. Unpacked into another host's backups
// directory it is the same backup, signed as it was. It returns the
// archive's path.
func (v *Verified) WriteExport(ctx context.Context, backupsDir, name string, now time.Time) (archive string, err error) {
	if !strings.HasSuffix(name, Suffix) || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("exporting: %q is not a backup's name", name)
	}
	p := &Package{Backup: v, BackupName: name}
	f, err := os.CreateTemp(backupsDir, portablePrefix+"*.tar.tmp")
	if err != nil {
		return "", fmt.Errorf("exporting: %w", err)
	}
	tmp := f.Name()
	defer func() {
		_ = f.Close()
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	var size int64
	for _, n := range p.backupFiles() {
		size += v.Sizes[n]
	}
	h := sha256.New()
	w, done := progress.Track(ctx, "export", size, io.MultiWriter(f, h))
	err = writeExportTar(ctx, w, p, now.Truncate(time.Second))
	done(err)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("exporting: %w", err)
	}
	if archive, err = publishFile(tmp, backupsDir, ExportPrefix+strings.TrimSuffix(name, Suffix)); err != nil {
		return "", err
	}
	if err := writeChecksum(backupsDir, archive, h); err != nil {
		return archive, fmt.Errorf("archive retained at %s: %w", archive, err)
	}
	return archive, nil
}

func writeExportTar(ctx context.Context, w io.Writer, p *Package, now time.Time) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p.BackupName + "/", Mode: 0o700, ModTime: now}); err != nil {
		return err
	}
	for _, n := range p.backupFiles() {
		if err := addFile(ctx, tw, p.BackupName+"/"+n, filepath.Join(p.Backup.Dir, n), 0o600, now); err != nil {
			return err
		}
	}
	return tw.Close()
}
