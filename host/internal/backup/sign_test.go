package backup

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/keys"
)

// signerFrom is an ed25519 signer from a fixed seed byte.
func signerFrom(seed byte) ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		panic(err)
	}
	return s
}

// testSigner is the project key of these tests; testTrust accepts what it
// signed and nothing unsigned.
var (
	testSigner = signerFrom(1)
	testTrust  = Trust{Key: testSigner.PublicKey()}
)

// TestBackupSignatureOpenSSH: a snapshot carries SHA256SUMS.sig, and
// OpenSSH's ssh-keygen checks it with the README's command.
func TestBackupSignatureOpenSSH(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	dir, err := w.snapshot(t.Context(), "box", "signed")
	must(t, err)
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen is required in CI: %v", err)
		}
		t.Skip("ssh-keygen not installed")
	}
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	line := `hermes-box namespaces="` + SignatureNamespace + `" ` + string(ssh.MarshalAuthorizedKey(testSigner.PublicKey()))
	must(t, os.WriteFile(allowed, []byte(line), 0o600))
	check := func() error {
		sums, err := os.Open(filepath.Join(dir, FileSums))
		must(t, err)
		defer sums.Close()
		cmd := exec.Command(bin, "-Y", "verify", "-f", allowed, "-I", "hermes-box", "-n", SignatureNamespace, "-s", filepath.Join(dir, FileSignature))
		cmd.Stdin = sums
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(string(out))
		}
		return nil
	}
	if err := check(); err != nil {
		t.Fatalf("ssh-keygen -Y verify refused the backup's signature: %v", err)
	}
	appendTo(t, filepath.Join(dir, FileSums), "\n")
	if err := check(); err == nil {
		t.Fatal("ssh-keygen -Y verify accepted a changed SHA256SUMS")
	}
}

// TestSignatureChecked: what a restore (Stage) and `backups --verify`
// (Verify) refuse, and that a refused signature stops Stage before it
// writes anything.
func TestSignatureChecked(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	good, err := w.snapshot(t.Context(), "box", "good")
	must(t, err)
	other := signerFrom(2)
	mine, theirs := keys.Fingerprint(testSigner.PublicKey()), keys.Fingerprint(other.PublicKey())
	// tamper changes the workspace after writing and recomputes its sum
	// (rewrite signs again; the cases put back or remove the signature).
	tamper := func(d string) {
		rewrite(t, d, FileWorkspace, func(s string) string { return s[:len(s)-1] + "\x01" })
	}
	tests := []struct {
		name   string
		mutate func(dir string)
		trust  Trust
		want   error
		says   []string
		signer bool // accepted, signed
		// late: refused once the copy was staged and checked, which
		// leaves nothing; every other refusal comes before any write.
		late bool
	}{
		{"good", func(string) {}, testTrust, nil, nil, true, false},
		{"changed, sums recomputed, signature kept", func(d string) {
			sig := must2(os.ReadFile(filepath.Join(d, FileSignature)))
			tamper(d)
			must(t, os.WriteFile(filepath.Join(d, FileSignature), sig, 0o600))
		}, testTrust, ErrInvalid, []string{"does not match the signed data"}, false, false},
		{"changed, sums recomputed, signature removed", func(d string) {
			tamper(d)
			must(t, os.Remove(filepath.Join(d, FileSignature)))
		}, testTrust, ErrUnsigned, []string{"--legacy-backup", "signature check is skipped"}, false, false},
		{"another project's key", func(d string) { signWith(t, d, other) }, testTrust, ErrForeign, []string{mine, theirs}, false, false},
		{"another project's key, legacy flag", func(d string) { signWith(t, d, other) }, Trust{Key: testSigner.PublicKey(), LegacyOK: true}, ErrForeign, []string{mine, theirs}, false, false},
		{"another namespace", func(d string) {
			sums := must2(os.ReadFile(filepath.Join(d, FileSums)))
			sig, err := keys.Sign(testSigner, "file", bytes.NewReader(sums))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(d, FileSignature), sig, 0o600))
		}, testTrust, ErrInvalid, []string{"namespace"}, false, false},
		{"manifest names another key", func(d string) {
			rewrite(t, d, FileManifest, func(s string) string {
				return strings.Replace(s, mine, theirs, 1)
			})
		}, testTrust, ErrInvalid, []string{"records " + theirs}, false, true},
		{"unsigned, legacy flag", func(d string) { must(t, os.Remove(filepath.Join(d, FileSignature))) },
			Trust{Key: testSigner.PublicKey(), LegacyOK: true}, nil, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b"+Suffix)
			gnu(t, "/", nil, "cp", "-a", good, dir)
			tt.mutate(dir)
			v, verr := Verify(t.Context(), dir, tt.trust)
			state := filepath.Join(t.TempDir(), "state")
			s, serr := Stage(t.Context(), dir, state, tt.trust, Limits{})
			if tt.want == nil {
				must(t, verr)
				must(t, serr)
				defer s.Remove()
				if (v.Signer != nil) != tt.signer || (s.Signer != nil) != tt.signer {
					t.Fatalf("signer %v / %v, want signed %v", v.Signer, s.Signer, tt.signer)
				}
				return
			}
			for _, err := range []error{verr, serr} {
				if !errors.Is(err, tt.want) {
					t.Fatalf("got %v, want %v", err, tt.want)
				}
				for _, w := range tt.says {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%v does not say %q", err, w)
					}
				}
			}
			if left, _ := os.ReadDir(state); tt.late && len(left) != 0 {
				t.Errorf("a refused stage left %v", left)
			}
			if _, err := os.Lstat(state); !tt.late && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Stage wrote %s before refusing the signature: %v", state, err)
			}
		})
	}
}

// signWith signs dir's SHA256SUMS with signer instead.
func signWith(t *testing.T, dir string, signer ssh.Signer) {
	t.Helper()
	sig, err := SignSums(signer, must2(os.ReadFile(filepath.Join(dir, FileSums))))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, FileSignature), sig, 0o600))
}
