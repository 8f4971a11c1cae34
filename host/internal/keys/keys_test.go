package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

const testComment = "hermes-box test"

func TestEnsureProjectKey(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the directory before EnsureProjectKey(path).
		setup func(t *testing.T, path string)
		// wantErr is a substring of the error; empty means success.
		wantErr string
		// wantPath says the error must name this file (path or path.pub).
		wantPath string
	}{
		{name: "creates", setup: func(*testing.T, string) {}},
		{name: "loads", setup: func(t *testing.T, path string) { mustEnsure(t, path) }},
		{name: "rewrites missing pub", setup: func(t *testing.T, path string) {
			mustEnsure(t, path)
			mustRemove(t, path+PubSuffix)
		}},
		{name: "refuses group readable", setup: func(t *testing.T, path string) {
			mustEnsure(t, path)
			mustChmod(t, path, 0o640)
		}, wantErr: "accessible by group or others", wantPath: "key"},
		{name: "refuses world readable", setup: func(t *testing.T, path string) {
			mustEnsure(t, path)
			mustChmod(t, path, 0o604)
		}, wantErr: "accessible by group or others", wantPath: "key"},
		{name: "refuses mismatched pub", setup: func(t *testing.T, path string) {
			mustEnsure(t, path)
			other := newEd25519(t)
			writeFile(t, path+PubSuffix, ssh.MarshalAuthorizedKey(other.PublicKey()), 0o644)
		}, wantErr: "does not match its private key", wantPath: "pub"},
		{name: "refuses non-ed25519", setup: func(t *testing.T, path string) {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			block, err := ssh.MarshalPrivateKey(k, "")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, pem.EncodeToMemory(block), 0o600)
		}, wantErr: "want ed25519", wantPath: "key"},
		{name: "refuses garbage", setup: func(t *testing.T, path string) {
			writeFile(t, path, []byte("not a key\n"), 0o600)
		}, wantErr: "parsing private key", wantPath: "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state", "keys", "id_ed25519")
			tt.setup(t, path)
			before := readIfExists(t, path)
			signer, err := EnsureProjectKey(path, testComment)
			if tt.wantErr != "" {
				checkRefusal(t, err, tt.wantErr, map[string]string{"key": path, "pub": path + PubSuffix}[tt.wantPath])
				if after := readIfExists(t, path); !bytes.Equal(before, after) {
					t.Errorf("refused key file was modified")
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureProjectKey: %v", err)
			}
			if before != nil {
				checkSameSigner(t, signer, before)
			}
			checkKeyFiles(t, path, signer)
			again, err := EnsureProjectKey(path, testComment)
			if err != nil {
				t.Fatalf("EnsureProjectKey again: %v", err)
			}
			if !bytes.Equal(again.PublicKey().Marshal(), signer.PublicKey().Marshal()) {
				t.Errorf("second EnsureProjectKey returned another key")
			}
		})
	}
}

func TestEnsureProjectKeyRefusesMultilineComment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if _, err := EnsureProjectKey(path, "a\nb"); err == nil {
		t.Fatal("EnsureProjectKey accepted a comment with a newline")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("key written despite the refusal (stat: %v)", err)
	}
}

// TestEnsureProjectKeyConcurrent checks that racing creators agree on one key
// instead of replacing each other's file.
func TestEnsureProjectKeyConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id_ed25519")
	const n = 8
	var wg sync.WaitGroup
	fps := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := EnsureProjectKey(path, testComment)
			errs[i] = err
			if err == nil {
				fps[i] = Fingerprint(s.PublicKey())
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if fps[i] != fps[0] {
			t.Errorf("caller %d got %s, caller 0 got %s", i, fps[i], fps[0])
		}
	}
	signer, err := EnsureProjectKey(path, testComment)
	if err != nil {
		t.Fatal(err)
	}
	if got := Fingerprint(signer.PublicKey()); got != fps[0] {
		t.Errorf("file holds %s, callers got %s", got, fps[0])
	}
	checkOnlyFiles(t, filepath.Dir(path), "id_ed25519", "id_ed25519.pub")
}

func TestFingerprint(t *testing.T) {
	tests := []struct {
		name string
		seed byte
	}{
		{name: "zero seed", seed: 0},
		{name: "seed 7", seed: 7},
		{name: "seed 255", seed: 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{tt.seed}, ed25519.SeedSize))
			pub, err := ssh.NewPublicKey(priv.Public())
			if err != nil {
				t.Fatal(err)
			}
			// The wire form of an ed25519 key (RFC 8709): string
			// "ssh-ed25519", string key, each with a uint32 length.
			var wire []byte
			for _, field := range [][]byte{[]byte("ssh-ed25519"), priv.Public().(ed25519.PublicKey)} {
				wire = binary.BigEndian.AppendUint32(wire, uint32(len(field)))
				wire = append(wire, field...)
			}
			sum := sha256.Sum256(wire)
			want := "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
			if got := Fingerprint(pub); got != want {
				t.Errorf("Fingerprint = %s, want %s", got, want)
			}
		})
	}
}

// TestFingerprintMatchesSSHKeygen compares with OpenSSH itself when it is
// installed; the package never needs ssh-keygen.
func TestFingerprintMatchesSSHKeygen(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen not installed")
	}
	path := filepath.Join(t.TempDir(), "id_ed25519")
	signer := mustEnsure(t, path)
	out, err := exec.CommandContext(t.Context(), keygen, "-lf", path+PubSuffix).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -lf: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 || fields[1] != Fingerprint(signer.PublicKey()) {
		t.Errorf("ssh-keygen printed %q, Fingerprint = %s", out, Fingerprint(signer.PublicKey()))
	}
}

func mustEnsure(t *testing.T, path string) ssh.Signer {
	t.Helper()
	s, err := EnsureProjectKey(path, testComment)
	if err != nil {
		t.Fatalf("EnsureProjectKey: %v", err)
	}
	return s
}

func newEd25519(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkRefusal(t *testing.T, err error, want, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("EnsureProjectKey succeeded, want an error containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if path != "" && !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}

// checkKeyFiles checks the modes and contents of both key files.
func checkKeyFiles(t *testing.T, path string, signer ssh.Signer) {
	t.Helper()
	checkMode(t, filepath.Dir(path), 0o700)
	checkMode(t, path, 0o600)
	checkMode(t, path+PubSuffix, 0o644)
	checkSameSigner(t, signer, readIfExists(t, path))
	pubLine := readIfExists(t, path+PubSuffix)
	pub, comment, _, rest, err := ssh.ParseAuthorizedKey(pubLine)
	if err != nil {
		t.Fatalf("parsing %s: %v", path+PubSuffix, err)
	}
	if !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf(".pub holds %s, signer is %s", Fingerprint(pub), Fingerprint(signer.PublicKey()))
	}
	if comment != testComment || len(rest) != 0 {
		t.Errorf(".pub = %q, want one line with comment %q", pubLine, testComment)
	}
	checkOnlyFiles(t, filepath.Dir(path), filepath.Base(path), filepath.Base(path)+PubSuffix)
}

func checkSameSigner(t *testing.T, signer ssh.Signer, privPEM []byte) {
	t.Helper()
	if !bytes.HasPrefix(privPEM, []byte("-----BEGIN OPENSSH PRIVATE KEY-----")) {
		t.Errorf("private key is not in OpenSSH format")
	}
	onDisk, err := ssh.ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatalf("parsing private key: %v", err)
	}
	if !bytes.Equal(onDisk.PublicKey().Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("signer does not match the key on disk")
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Errorf("%s has mode %04o, want %04o", path, got, want)
	}
}

// checkOnlyFiles fails if dir holds anything but names (a temp file left over).
func checkOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	sort.Strings(names)
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

func readIfExists(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
	mustChmod(t, path, perm)
}

func mustChmod(t *testing.T, path string, perm fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
