package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// Verified is a backup that passed every check.
type Verified struct {
	Dir      string
	Manifest Manifest
	Sums     Sums
	Sizes    map[string]int64
	// Signer is the key that signed it; nil for an unsigned backup the
	// Trust accepted.
	Signer ssh.PublicKey
}

// Verify checks the backup in dir: first its signature as t says, then
// layout (a real directory, the six files regular), SHA256SUMS against
// every file, the manifest (recording the signer), the warnings file
// empty, the rootfs listing equal to rootfs-files.txt, and the workspace
// content rules. Archive entries that could escape are refused.
func Verify(ctx context.Context, dir string, t Trust) (*Verified, error) {
	ss, err := t.readSignedSums(dir)
	if err != nil {
		return nil, err
	}
	sums, signer := ss.sums, ss.signer
	sizes := map[string]int64{}
	for _, name := range Files {
		sum, size, err := hashFile(ctx, filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if sum != sums[name] {
			return nil, fmt.Errorf("%w: checksum mismatch: %s", ErrInvalid, filepath.Join(dir, name))
		}
		sizes[name] = size
	}
	m, err := verifyContents(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := t.checkOrigin(m, signer); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &Verified{Dir: dir, Manifest: m, Sums: sums, Sizes: sizes, Signer: signer}, nil
}

// readSums checks that dir is a directory and parses its SHA256SUMS.
func readSums(dir string) (Sums, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrInvalid, dir)
	}
	data, err := readSmall(filepath.Join(dir, FileSums))
	if err != nil {
		return nil, err
	}
	sums, err := ParseSums(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
	}
	return sums, nil
}

// verifyContents checks everything but the checksums.
func verifyContents(ctx context.Context, dir string) (Manifest, error) {
	data, err := readSmall(filepath.Join(dir, FileManifest))
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
	}
	warnings, err := readSmall(filepath.Join(dir, FileWarnings))
	if err != nil {
		return Manifest{}, err
	}
	if len(warnings) != 0 {
		return Manifest{}, fmt.Errorf("%w: %s is not empty: the snapshot had read warnings", ErrInvalid, filepath.Join(dir, FileWarnings))
	}
	rootNames, err := listFile(ctx, filepath.Join(dir, FileRootfs))
	if err != nil {
		return Manifest{}, err
	}
	listing, err := readListing(filepath.Join(dir, FileListing))
	if err != nil {
		return Manifest{}, err
	}
	if !slices.Equal(rootNames, listing) {
		return Manifest{}, fmt.Errorf("%w: %s does not match %s (%d entries listed, %d in the archive)",
			ErrInvalid, FileListing, FileRootfs, len(listing), len(rootNames))
	}
	wsNames, err := listFile(ctx, filepath.Join(dir, FileWorkspace))
	if err != nil {
		return Manifest{}, err
	}
	return m, CheckWorkspace(wsNames, m.Legacy())
}

// openRegular opens path without following a symlink and insists on a
// regular file. It opens without blocking: a FIFO planted in a backup
// directory would otherwise block the open until something writes to it.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, path)
	}
	return f, fi, nil
}

func readSmall(path string) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxSmallFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, path, maxSmallFile)
	}
	return data, nil
}

func readListing(path string) ([]string, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One name and its newline per entry at most.
	data, err := bounded.ReadAll(f, maxListing, path)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrInvalid, path, err)
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		return nil, fmt.Errorf("%w: %s does not end in a newline", ErrInvalid, path)
	}
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil, nil
	}
	return strings.Split(text, "\n"), nil
}

func listFile(ctx context.Context, path string) ([]string, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := ListArchive(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("%w: listing %s: %w", ErrInvalid, path, err)
	}
	return names, nil
}

func hashFile(ctx context.Context, path string) (string, int64, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxReader{ctx, f}, make([]byte, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
