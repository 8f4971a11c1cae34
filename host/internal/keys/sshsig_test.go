package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const testNamespace = "hermes-box-test@hermes-box"

// fixedSigner is an ed25519 key from a fixed seed: its signatures are
// deterministic, so the golden file pins the format byte for byte.
func fixedSigner(t testing.TB) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

func TestSignGolden(t *testing.T) {
	s, _ := fixedSigner(t)
	got, err := Sign(s, testNamespace, strings.NewReader("hello, backup\n"))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sshsig.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("signature differs from %s:\n%s\nwant:\n%s", golden, got, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		if len(line) > armorWidth && !strings.HasPrefix(line, "-----") {
			t.Errorf("armor line of %d characters", len(line))
		}
	}
}

func TestVerify(t *testing.T) {
	s, _ := fixedSigner(t)
	msg := "hello, backup\n"
	sig, err := Sign(s, testNamespace, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, msg, ns string
		sig           []byte
		ok            bool
	}{
		{"good", msg, testNamespace, sig, true},
		{"other message", msg + "x", testNamespace, sig, false},
		{"other namespace", msg, "file", sig, false},
		{"CRLF armor", msg, testNamespace, bytes.ReplaceAll(sig, []byte("\n"), []byte("\r\n")), true},
		{"no armor", msg, testNamespace, sig[len(armorBegin)+1:], false},
		{"truncated", msg, testNamespace, sig[:len(sig)-40], false},
		{"trailing text", msg, testNamespace, append(bytes.Clone(sig), "x"...), false},
		{"empty", msg, testNamespace, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub, err := Verify(tt.sig, tt.ns, strings.NewReader(tt.msg))
			if tt.ok {
				if err != nil || !bytes.Equal(pub.Marshal(), s.PublicKey().Marshal()) {
					t.Fatalf("Verify = %v, %v", pub, err)
				}
				return
			}
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify = %v, want ErrBadSignature", err)
			}
		})
	}
}

// keygen finds ssh-keygen: CI must have it.
func keygen(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen is required in CI: %v", err)
		}
		t.Skip("ssh-keygen not installed")
	}
	return p
}

// writeKeyPair writes the fixed key as ssh-keygen reads it and an
// allowed_signers file trusting it for testNamespace.
func writeKeyPair(t *testing.T, dir string) (keyPath, allowed string) {
	t.Helper()
	s, priv := fixedSigner(t)
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	keyPath = filepath.Join(dir, "key")
	writeFile(t, keyPath, pem.EncodeToMemory(block), 0o600)
	allowed = filepath.Join(dir, "allowed_signers")
	line := `hermes-box namespaces="` + testNamespace + `" ` + string(ssh.MarshalAuthorizedKey(s.PublicKey()))
	writeFile(t, allowed, []byte(line), 0o644)
	return keyPath, allowed
}

// TestSSHKeygenInterop: OpenSSH accepts our signature and we accept
// OpenSSH's, and both are the same bytes.
func TestSSHKeygenInterop(t *testing.T) {
	bin := keygen(t)
	dir := t.TempDir()
	keyPath, allowed := writeKeyPair(t, dir)
	msgPath := filepath.Join(dir, "SHA256SUMS")
	msg := []byte("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  manifest.txt\n")
	writeFile(t, msgPath, msg, 0o600)
	s, _ := fixedSigner(t)

	ours, err := Sign(s, testNamespace, bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	sigPath := filepath.Join(dir, "ours.sig")
	writeFile(t, sigPath, ours, 0o600)
	verify := func(sig string) ([]byte, error) {
		cmd := exec.Command(bin, "-Y", "verify", "-f", allowed, "-I", "hermes-box", "-n", testNamespace, "-s", sig)
		cmd.Stdin = bytes.NewReader(msg)
		return cmd.CombinedOutput()
	}
	if out, err := verify(sigPath); err != nil {
		t.Fatalf("ssh-keygen -Y verify refused our signature: %v\n%s", err, out)
	}
	// A message changed after signing: OpenSSH refuses it too (the check
	// above can fail).
	writeFile(t, sigPath, append([]byte(nil), ours...), 0o600)
	cmd := exec.Command(bin, "-Y", "verify", "-f", allowed, "-I", "hermes-box", "-n", testNamespace, "-s", sigPath)
	cmd.Stdin = bytes.NewReader(append(bytes.Clone(msg), 'x'))
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("ssh-keygen -Y verify accepted a changed message:\n%s", out)
	}

	cmd = exec.Command(bin, "-Y", "sign", "-f", keyPath, "-n", testNamespace, msgPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	theirs, err := os.ReadFile(msgPath + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := Verify(theirs, testNamespace, bytes.NewReader(msg))
	if err != nil {
		t.Fatalf("ssh-keygen's signature refused: %v\n%s", err, theirs)
	}
	if Fingerprint(pub) != Fingerprint(s.PublicKey()) {
		t.Fatalf("signer %s, want %s", Fingerprint(pub), Fingerprint(s.PublicKey()))
	}
	if !bytes.Equal(theirs, ours) {
		t.Errorf("ssh-keygen wrote\n%s\nwe wrote\n%s", theirs, ours)
	}
}

func FuzzParseSignature(f *testing.F) {
	s, _ := fixedSigner(f)
	sig, err := Sign(s, testNamespace, strings.NewReader("x"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sig)
	f.Add([]byte(armorBegin + "\nU1NIU0lH\n" + armorEnd + "\n"))
	f.Add([]byte(armorBegin + "\n" + armorEnd))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseSignature(data)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("error %v is not ErrBadSignature", err)
			}
			return
		}
		if p.PublicKey == nil || p.Sig == nil || (p.Hash != "sha256" && p.Hash != "sha512") {
			t.Fatalf("parsed %+v", p)
		}
		// What parses verifies or is refused, never panics.
		_, _ = Verify(data, p.Namespace, strings.NewReader("x"))
	})
}
