package backupset

import (
	"archive/tar"
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
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// importPrefix names the directory an export is unpacked into before it
// is verified and published under its backup's name.
const importPrefix = ".hermes-box-import-"

// maxSumsFile bounds an export's .sha256 file: one line.
const maxSumsFile = 4096

// IsExport reports whether path is an export's archive (`backups
// export`'s hermes-box-export-<name>.tar), which restore unpacks first.
func IsExport(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && strings.HasPrefix(filepath.Base(path), backup.ExportPrefix) &&
		strings.HasSuffix(path, ".tar")
}

// ImportExport unpacks the export archive into the backups directory dir
// as the backup it holds, and returns that backup's path. The archive's
// .sha256, when it lies beside it, must match; the archive must hold one
// backup directory of a backup's files only, each within what is read
// of it (lim.CheckFile, as a staging checks it) and all of them within
// the free space less lim's reserve; the unpacked
// backup must verify against t (its signature first) before it is
// published by rename; a backup of that name already there is never
// replaced (one with the same checksums, an earlier import of this file,
// is taken as it is). Whatever fails leaves dir as it was. The caller holds the
// operation lock.
func ImportExport(ctx context.Context, archive, dir string, t backup.Trust, lim backup.Limits) (string, error) {
	lim = lim.WithDefaults()
	want, err := archiveSum(archive)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	tmp, err := os.MkdirTemp(dir, importPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	name, err := unpackExport(ctx, archive, want, tmp, lim)
	if err == nil {
		_, err = backup.Verify(ctx, tmp, t)
	}
	dest := filepath.Join(dir, name)
	if err == nil {
		if _, serr := os.Lstat(dest); serr == nil {
			// An earlier restore of this file unpacked it (and then
			// stopped, say for want of the base image): the same
			// signed checksums are the same backup.
			if sameSums(tmp, dest) {
				_ = os.RemoveAll(tmp)
				return dest, nil
			}
			err = fmt.Errorf("%s is there already and is another backup of that name", dest)
		}
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	return dest, nil
}

// sameSums reports whether the backups a and b have the same SHA256SUMS
// (each verified: the same files).
func sameSums(a, b string) bool {
	x, err := os.ReadFile(filepath.Join(a, backup.FileSums))
	if err != nil {
		return false
	}
	y, err := os.ReadFile(filepath.Join(b, backup.FileSums))
	return err == nil && bytes.Equal(x, y)
}

// archiveSum is the SHA-256 that the .sha256 beside archive gives it,
// "" when there is none.
func archiveSum(archive string) (string, error) {
	f, err := os.Open(archive + ".sha256")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	line, err := io.ReadAll(io.LimitReader(f, maxSumsFile+1))
	_ = f.Close()
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", archive, err)
	}
	fields := strings.Fields(string(line))
	if len(line) > maxSumsFile || len(fields) != 2 || strings.TrimPrefix(fields[1], "*") != filepath.Base(archive) {
		return "", fmt.Errorf("importing %s: %s.sha256 is not one line `<sha256>  %s`", archive, archive, filepath.Base(archive))
	}
	return fields[0], nil
}

// unpackExport writes the backup files of the export archive into tmp and
// returns the backup's name: the archive is one directory, a backup's
// name, then its files, each once, each a backup file's name. The
// archive is read once (it may be on a slow stick): with a sum (its
// .sha256's) it is hashed as it is unpacked, then to its end, and a copy
// that does not hash to sum is refused as damaged whatever else
// unpacking it found.
func unpackExport(ctx context.Context, archive, sum, tmp string, lim backup.Limits) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if sum == "" {
		return unpackTar(ctx, f, tmp, lim)
	}
	h := sha256.New()
	name, err := unpackTar(ctx, io.TeeReader(f, h), tmp, lim)
	if _, cerr := io.Copy(h, f); cerr != nil {
		return "", errors.Join(err, cerr)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", fmt.Errorf("it hashes to %s, its .sha256 says %s: the copy is damaged", got, sum)
	}
	return name, err
}

// unpackTar is unpackExport of the archive r.
func unpackTar(ctx context.Context, r io.Reader, tmp string, lim backup.Limits) (string, error) {
	free, err := lim.FreeSpace(tmp)
	if err != nil {
		return "", fmt.Errorf("checking free space in %s: %w", tmp, err)
	}
	allowed := append(slices.Clone(backup.Files), backup.FileSums, backup.FileSignature)
	tr := tar.NewReader(r)
	var name string
	var total int64
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the archive: %w", err)
		}
		if name == "" {
			name = strings.TrimSuffix(hdr.Name, "/")
			if hdr.Typeflag != tar.TypeDir || !strings.HasSuffix(name, backup.Suffix) || strings.HasPrefix(name, ".") ||
				strings.ContainsAny(name, "/\\\x00") {
				return "", fmt.Errorf("the archive's first entry %q is not a backup's directory", hdr.Name)
			}
			continue
		}
		file, ok := strings.CutPrefix(hdr.Name, name+"/")
		if !ok || hdr.Typeflag != tar.TypeReg || !slices.Contains(allowed, file) || seen[file] {
			return "", fmt.Errorf("the archive's entry %q is not one of %s's files (%s)", hdr.Name, name, strings.Join(allowed, ", "))
		}
		if err := lim.CheckFile(file, hdr.Size); err != nil {
			return "", fmt.Errorf("the archive's entry %q has %d bytes: %w", hdr.Name, hdr.Size, err)
		}
		if total += hdr.Size; total > free-lim.Reserve {
			return "", fmt.Errorf("%w: %s has %d bytes free, the archive's backup needs %d more than a reserve of %d", backup.ErrNoSpace, tmp, free, total, lim.Reserve)
		}
		seen[file] = true
		if err := writeImported(filepath.Join(tmp, file), io.LimitReader(tr, hdr.Size), hdr.Size); err != nil {
			return "", err
		}
	}
	if name == "" {
		return "", errors.New("the archive is empty")
	}
	return name, nil
}

// writeImported writes size bytes of r to the new file path and syncs it.
func writeImported(path string, r io.Reader, size int64) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: the archive ends after %d of its %d bytes", filepath.Base(path), n, size)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
