package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Short names for tartest's entry builders, used throughout these tests.
type ent = tartest.Entry

var (
	file     = tartest.File
	dir      = tartest.Dir
	symlink  = tartest.Symlink
	hardlink = tartest.Hardlink
	special  = tartest.Special
)

// writeLayout stores gzipped layer blobs in an OCI layout's blob dir and
// returns their descriptors.
func writeLayout(t testing.TB, dir string, layers ...[]byte) []ispec.Descriptor {
	t.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []ispec.Descriptor
	for _, l := range layers {
		sum := sha256.Sum256(l)
		h := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(blobs, h), l, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, ispec.Descriptor{MediaType: ispec.MediaTypeImageLayerGzip, Digest: digest.Digest("sha256:" + h), Size: int64(len(l))})
	}
	return out
}

// readTestdata reads a file of testdata.
func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// push uploads an image or index under repo:tag and returns the pinned
// reference.
func push(t *testing.T, reg *ocitest.Registry, repoTag string, img v1.Image, idx v1.ImageIndex) Reference {
	t.Helper()
	ref, err := ParseReference(reg.Push(t, repoTag, img, idx))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// treeSnapshot lists every path under root with its type and size, except
// paths under skip.
func treeSnapshot(t testing.TB, root string, skip ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s {
				return filepath.SkipDir
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+fi.Mode().String()+" "+sizeString(fi))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func sizeString(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "-"
	}
	b, _ := json.Marshal(fi.Size())
	return string(b)
}

// recordEvents collects emitted events.
type recordEvents struct {
	mu  sync.Mutex
	evs []string
}

func (r *recordEvents) Emit(ev protocol.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, string(ev.Type)+":"+ev.Message)
	return nil
}

func (r *recordEvents) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}
