package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// refName is the tag the pull gives the image inside its cache layout.
const refName = "executor"

// Image is a verified single-platform image in an OCI layout.
type Image struct {
	// LayoutDir is the OCI layout holding the blobs.
	LayoutDir string
	// ManifestDigest names the platform manifest ("sha256:…").
	ManifestDigest string
	Manifest       ispec.Manifest
	Config         ispec.Image
}

// Platform is an image's operating system and CPU architecture.
type Platform struct {
	OS, Architecture string
}

func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// openImage reads the manifest tagged refName from layoutDir, checks the
// digest of the manifest, the config and every layer, and checks the
// config's platform: containers/image copies a single-platform image of
// another architecture without complaint.
func openImage(layoutDir string, want Platform) (*Image, error) {
	var index ispec.Index
	if err := readJSON(filepath.Join(layoutDir, "index.json"), &index); err != nil {
		return nil, err
	}
	var desc *ispec.Descriptor
	for i, m := range index.Manifests {
		if m.Annotations[ispec.AnnotationRefName] == refName {
			desc = &index.Manifests[i]
		}
	}
	if desc == nil {
		return nil, fmt.Errorf("%s: no manifest named %q", filepath.Join(layoutDir, "index.json"), refName)
	}
	img := &Image{LayoutDir: layoutDir, ManifestDigest: string(desc.Digest)}
	if err := readBlobJSON(layoutDir, *desc, &img.Manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := readBlobJSON(layoutDir, img.Manifest.Config, &img.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	got := Platform{OS: img.Config.OS, Architecture: img.Config.Architecture}
	if got != want {
		return nil, fmt.Errorf("image %s is for %s, this box needs %s", img.ManifestDigest, got, want)
	}
	if len(img.Manifest.Layers) == 0 {
		return nil, fmt.Errorf("manifest %s has no layers", img.ManifestDigest)
	}
	for i, l := range img.Manifest.Layers {
		if err := verifyBlob(layoutDir, l); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i+1, err)
		}
	}
	return img, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// maxJSONBlob bounds manifests and configs read into memory.
const maxJSONBlob = 4 << 20

// readBlobJSON reads a small blob, checks its size and digest, decodes it.
func readBlobJSON(layoutDir string, d ispec.Descriptor, v any) error {
	if d.Size < 0 || d.Size > maxJSONBlob {
		return fmt.Errorf("blob %s: size %d out of range", d.Digest, d.Size)
	}
	path, err := blobPath(layoutDir, string(d.Digest))
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading blob: %w", err)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != string(d.Digest) || int64(len(b)) != d.Size {
		return fmt.Errorf("blob %s: digest mismatch (got %s, %d bytes)", path, got, len(b))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// verifyBlob hashes a blob file and compares size and digest.
func verifyBlob(layoutDir string, d ispec.Descriptor) error {
	path, err := blobPath(layoutDir, string(d.Digest))
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening blob: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != string(d.Digest) || n != d.Size {
		return fmt.Errorf("blob %s: digest mismatch (got %s, %d bytes, want %d)", path, got, n, d.Size)
	}
	return nil
}
