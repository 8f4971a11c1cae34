package oci

import (
	"context"
	"path/filepath"
	"slices"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
)

// KeepExecutor selects app/… and usr/local/bin/bun; app, usr, usr/local
// and usr/local/bin must be directories (a symlink there would point the
// payload check and the supervisor outside the release).
func KeepExecutor(parts []string) tarfs.Selected {
	if len(parts) == 0 {
		return tarfs.NotSelected
	}
	if parts[0] == "app" {
		if len(parts) == 1 {
			return tarfs.SelectedDir
		}
		return tarfs.SelectedAll
	}
	bun := []string{"usr", "local", "bin", "bun"}
	switch {
	case len(parts) > len(bun) || !slices.Equal(parts, bun[:len(parts)]):
		return tarfs.NotSelected
	case len(parts) == len(bun):
		return tarfs.SelectedAll
	}
	return tarfs.SelectedDir
}

// ExtractOptions tune Extract. The zero value keeps Executor's paths and
// gives the files to the calling user.
type ExtractOptions struct {
	// Keep selects paths; nil means KeepExecutor.
	Keep tarfs.Select
	// UID and GID own the unpacked files; -1 means the effective ids.
	UID, GID int
}

// Extract unpacks layers (blobs of the OCI layout at layoutDir) into dest
// with tarfs.UnpackBlobs: sizes and digests checked, every entry
// pre-checked, only kept paths written. On error dest may hold a partial
// tree: the caller removes it (it is always a staging directory).
func Extract(ctx context.Context, layoutDir string, layers []ispec.Descriptor, dest string, opt ExtractOptions) error {
	if opt.Keep == nil {
		opt.Keep = KeepExecutor
	}
	blobs := make([]tarfs.Blob, 0, len(layers))
	for _, d := range layers {
		path, err := blobPath(layoutDir, string(d.Digest))
		if err != nil {
			return err
		}
		blobs = append(blobs, tarfs.Blob{Path: path, MediaType: d.MediaType, Digest: string(d.Digest), Size: d.Size})
	}
	return tarfs.UnpackBlobs(ctx, blobs, dest, tarfs.UnpackOptions{Select: opt.Keep, UID: opt.UID, GID: opt.GID})
}

// blobPath is where an OCI layout keeps a blob.
func blobPath(layoutDir string, d string) (string, error) {
	hexPart, err := parseDigest(d)
	if err != nil {
		return "", err
	}
	return filepath.Join(layoutDir, "blobs", "sha256", hexPart), nil
}
