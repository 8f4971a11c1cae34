package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// plainTar writes a tar (not compressed) of names: those ending in "/"
// directories, the rest files holding their own name.
func plainTar(w io.Writer, names []string) error {
	tw := tar.NewWriter(w)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(n))}
		if strings.HasSuffix(n, "/") {
			hdr.Mode, hdr.Typeflag, hdr.Size = 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, n); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

var (
	streamRoot = []string{"./", "etc/", "etc/hostname", "usr/", "usr/bin/", "usr/bin/tool"}
	streamWS   = []string{"./", "hermes-home/", "hermes-home/config.yaml", "codex-home/", "codex-home/config.toml", "work/"}
)

// tarParts is a TarSource of the given listings.
func tarParts(root, ws []string) TarSource {
	return func(_ context.Context, part string, w io.Writer) error {
		if part == boxlayout.PartRootfs {
			return plainTar(w, root)
		}
		return plainTar(w, ws)
	}
}

// TestStageStream: a streamed backup is staged as a v2 backup that Verify
// accepts (signature, sums, rootfs listing, content rules) and WriteApply
// reads; whatever breaks a check fails the staging and leaves nothing in
// the state directory.
func TestStageStream(t *testing.T) {
	anchor := `{"count":1}`
	good := tarParts(streamRoot, streamWS)
	tests := []struct {
		name string
		src  TarSource
		edit func(*Meta)
		want string
		is   error
	}{
		{"good", good, nil, "", nil},
		{"workspace lacks the config", tarParts(streamRoot, []string{"./", "work/", "codex-home/config.toml"}), nil,
			"lacks hermes-home/config.yaml", ErrInvalid},
		{"unsafe path", tarParts(append(slices.Clone(streamRoot), "../escape"), streamWS), nil, "unsafe path", ErrInvalid},
		{"entry flood", good, func(m *Meta) { m.Limits.MaxEntries = 5 }, "number of entries", ErrLimit},
		{"part cap", good, func(m *Meta) { m.Limits.MaxPart, m.Limits.MaxUnpacked = 64, 1<<20 }, "HERMES_BOX_SNAPSHOT_MAX_MIB", ErrLimit},
		{"gzip bomb", good, func(m *Meta) { m.Limits.MaxUnpacked = 2048 }, "unpacked archive", ErrLimit},
		{"no room", good, func(m *Meta) {
			m.Limits.FreeSpace = func(string) (int64, error) { return 1 << 20, nil }
		}, "not enough free space", ErrNoSpace},
		{"not a tar", func(_ context.Context, _ string, w io.Writer) error {
			_, err := w.Write(bytes.Repeat([]byte("x"), 4096))
			return err
		}, nil, "reading tar", nil},
		{"source fails", func(_ context.Context, part string, w io.Writer) error {
			if err := plainTar(w, streamRoot[:3]); err != nil {
				return err
			}
			return errors.New("chunk 1234 is corrupt")
		}, nil, "chunk 1234 is corrupt", nil},
		{"anchor of two lines", good, func(m *Meta) { m.AuditAnchor = anchor + "\naudit_anchor=forged" }, "one line", nil},
		{"no key", good, func(m *Meta) { m.Signer = nil }, "no project key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			meta := Meta{Machine: "box", Label: "l", Smolvm: "1.0", GOOS: "linux", Signer: testSigner, AuditAnchor: anchor,
				Now:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				Limits: Limits{FreeSpace: func(string) (int64, error) { return 1 << 40, nil }}}
			if tt.edit != nil {
				tt.edit(&meta)
			}
			s, err := StageStream(t.Context(), state, meta, tt.src)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
					t.Fatalf("got %v, want %q (%v)", err, tt.want, tt.is)
				}
				if left, _ := os.ReadDir(state); len(left) != 0 {
					t.Fatalf("a failed staging left %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Remove()
			checkStreamStaged(t, s, anchor)
		})
	}
}

// checkStreamStaged: the staged copy verifies as a v2 backup of
// streamRoot and streamWS, read-only, and what StageStream returned is
// what Verify finds.
func checkStreamStaged(t *testing.T, s *Staged, anchor string) {
	t.Helper()
	v, err := Verify(t.Context(), s.Dir, testTrust)
	if err != nil {
		t.Fatalf("the staged copy does not verify: %v", err)
	}
	if !maps.Equal(v.Sums, s.Sums) || !maps.Equal(v.Sizes, s.Sizes) || v.Manifest != s.Manifest {
		t.Fatalf("staged %+v, verified %+v", s.Verified, *v)
	}
	if s.Manifest.AuditAnchor != anchor || s.Signer == nil || keys.Fingerprint(s.Signer) != keys.Fingerprint(testSigner.PublicKey()) {
		t.Fatalf("manifest %+v, signer %v", s.Manifest, s.Signer)
	}
	listing, err := readListing(filepath.Join(s.Dir, FileListing))
	if err != nil || !slices.Equal(listing, slices.Sorted(slices.Values(streamRoot))) {
		t.Fatalf("listing %v (%v), want %v", listing, err, streamRoot)
	}
	if fi, err := os.Stat(s.Dir); err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("the staged directory is %v (%v), want read-only", fi.Mode(), err)
	}
	var apply bytes.Buffer
	if err := WriteApply(s.Dir, []byte("ssh-ed25519 AAAA k\n"), &apply); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{FileRootfs, FileWorkspace} {
		if !strings.Contains(apply.String(), s.Sums[file]) {
			t.Errorf("the apply stream does not carry %s's sum", file)
		}
	}
}

// v2Parts is a TarSource of the parts of the v2 backup in dir,
// decompressed: what an incremental backup of the same tree decodes to.
func v2Parts(dir string) TarSource {
	return func(ctx context.Context, part string, w io.Writer) error {
		f, err := os.Open(filepath.Join(dir, part+".tar.gz"))
		if err != nil {
			return err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, ctxReader{ctx, zr})
		return err
	}
}
