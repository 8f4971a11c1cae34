package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func part(name string, body []byte) protocol.ApplyPart {
	sum := sha256.Sum256(body)
	return protocol.ApplyPart{Name: name, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:]), Body: bytes.NewReader(body)}
}

// endWatch calls atEnd once the last byte of the stream has been read.
type endWatch struct {
	r      io.Reader
	left   int
	atEnd  func()
	called bool
}

func (w *endWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.left -= n
	if w.left == 0 && !w.called {
		w.called = true
		w.atEnd()
	}
	return n, err
}

// TestApplyPrunesAfterTheStream: the walk that removes root entries the
// archive does not list runs only once the whole stream has been read, so
// the input keeps flowing while the root is applied (smolvm before 1.8.1
// ends an exec -i whose input the guest stops reading for 10 s).
func TestApplyPrunesAfterTheStream(t *testing.T) {
	root := t.TempDir()
	stale := filepath.Join(root, "opt", "stale.txt")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	rootfs := tartest.TarGz(t, []tartest.Entry{tartest.Dir("etc/"), tartest.File("etc/passwd", "boxadmin:x:1000:1000::/home/boxadmin:/bin/sh\n"),
		tartest.Dir("home/"), tartest.Dir("home/boxadmin/")})
	// The workspace part is far larger than Apply's read buffer, so the
	// stream's end is read long after the root part.
	big := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{}).Read(big)
	workspace := tartest.TarGz(t, []tartest.Entry{tartest.File("note.txt", "restored\n"), tartest.File("big.bin", string(big))})
	var stream bytes.Buffer
	err := protocol.WriteApplyStream(&stream, []protocol.ApplyPart{
		part(protocol.ApplyPartKey, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA test\n")),
		part(boxlayout.PartRootfs, rootfs), part(boxlayout.PartWorkspace, workspace)})
	if err != nil {
		t.Fatal(err)
	}
	staleAtEnd := false
	w := &endWatch{r: bytes.NewReader(stream.Bytes()), left: stream.Len(), atEnd: func() {
		_, err := os.Lstat(stale)
		staleAtEnd = err == nil
	}}
	if err := Apply(context.Background(), w, ApplyOptions{Root: root}); err != nil {
		t.Fatal(err)
	}
	if !w.called || !staleAtEnd {
		t.Errorf("the root was pruned before the stream's end was read (end read: %v)", w.called)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Error("the entry the archive does not list is still there")
	}
	if b, err := os.ReadFile(filepath.Join(root, "workspace", "note.txt")); err != nil || string(b) != "restored\n" {
		t.Errorf("workspace note %q, %v", b, err)
	}
}

// TestApplyWorkspaceOnly: a stream without the root part (restore
// --workspace-only) replaces the workspace and leaves the root as the
// image made it, recording the image's seed as the workspace's so that
// boot does not seed over the restored workspace; a full stream replaces
// the root and leaves the seed record to the backup's root.
func TestApplyWorkspaceOnly(t *testing.T) {
	rootfs := tartest.TarGz(t, []tartest.Entry{tartest.Dir("etc/"), tartest.File("etc/passwd", "boxadmin:x:1000:1000::/home/boxadmin:/bin/sh\n"),
		tartest.Dir("home/"), tartest.Dir("home/boxadmin/")})
	workspace := tartest.TarGz(t, []tartest.Entry{tartest.File("note.txt", "restored\n")})
	key := []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA test\n")
	for _, tc := range []struct {
		name          string
		parts         []string
		imageFileKept bool
		restoredID    string
	}{
		{"full", []string{boxlayout.PartRootfs, boxlayout.PartWorkspace}, false, ""},
		{"workspace only", []string{boxlayout.PartWorkspace}, true, "base-1-2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range map[string]string{
				"opt/from-image.txt":               "image\n",
				"etc/passwd":                       "boxadmin:x:1000:1000::/home/boxadmin:/bin/sh\n",
				boxlayout.InRoot(boxlayout.SeedID): "base-1-2\n",
				"workspace/stale.txt":              "stale\n",
			} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			parts := []protocol.ApplyPart{part(protocol.ApplyPartKey, key)}
			for _, p := range tc.parts {
				parts = append(parts, part(p, map[string][]byte{boxlayout.PartRootfs: rootfs, boxlayout.PartWorkspace: workspace}[p]))
			}
			var stream bytes.Buffer
			if err := protocol.WriteApplyStream(&stream, parts); err != nil {
				t.Fatal(err)
			}
			if err := Apply(context.Background(), &stream, ApplyOptions{Root: root}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(root, "opt", "from-image.txt")); (err == nil) != tc.imageFileKept {
				t.Errorf("the image's file outside the workspace: kept %v, want %v", err == nil, tc.imageFileKept)
			}
			if b, err := os.ReadFile(filepath.Join(root, "workspace", "note.txt")); err != nil || string(b) != "restored\n" {
				t.Errorf("workspace note %q, %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(root, "workspace", "stale.txt")); err == nil {
				t.Error("the workspace was not replaced")
			}
			got, _ := os.ReadFile(filepath.Join(root, boxlayout.InRoot(boxlayout.RestoredID)))
			if string(got) != tc.restoredID {
				t.Errorf("the restored workspace's seed record %q, want %q", got, tc.restoredID)
			}
			if _, err := os.Stat(filepath.Join(root, boxlayout.InRoot(boxlayout.RestoreReady))); err != nil {
				t.Errorf("not marked ready: %v", err)
			}
		})
	}
}
