package hostkeys

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestEnsureCreatesOnceAndReports(t *testing.T) {
	root := t.TempDir()
	first, err := Ensure(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Keys) != 1 || first.Keys[0].Type != ssh.KeyAlgoED25519 || first.Keys[0].Path != "/etc/ssh/ssh_host_ed25519_key.pub" {
		t.Fatalf("got %+v", first)
	}
	priv := filepath.Join(root, Dir, keyName)
	st, err := os.Stat(priv)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", st, err)
	}
	b, _ := os.ReadFile(priv)
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatalf("sshd could not read the key: %v", err)
	}
	if got := ssh.FingerprintSHA256(signer.PublicKey()); got != first.Keys[0].Fingerprint {
		t.Fatalf("fingerprint %s does not match private key %s", first.Keys[0].Fingerprint, got)
	}
	second, err := Ensure(root)
	if err != nil {
		t.Fatal(err)
	}
	if second.Keys[0].Fingerprint != first.Keys[0].Fingerprint {
		t.Fatal("second run replaced an existing host key")
	}
}

func TestListReportsExistingKeysOfOtherTypes(t *testing.T) {
	root := t.TempDir()
	if _, err := Ensure(root); err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(filepath.Join(root, Dir, keyName+".pub"))
	if err := os.WriteFile(filepath.Join(root, Dir, "ssh_host_other_key.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := List(root)
	if err != nil || len(keys.Keys) != 2 {
		t.Fatalf("got %+v, %v", keys, err)
	}
	if err := os.WriteFile(filepath.Join(root, Dir, "ssh_host_bad_key.pub"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(root); err == nil {
		t.Fatal("a corrupt host key was reported")
	}
}

// TestEnsureConcurrentCallersAgree: boot and the host's `hostkeys` run at
// once on a first boot; every caller must report the one key that the
// private key file (what sshd serves) holds.
func TestEnsureConcurrentCallersAgree(t *testing.T) {
	for round := range 10 {
		root := t.TempDir()
		const callers = 8
		fps := make([]string, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				keys, err := Ensure(root)
				errs[i] = err
				if err == nil && len(keys.Keys) == 1 {
					fps[i] = keys.Keys[0].Fingerprint
				}
			})
		}
		wg.Wait()
		b, err := os.ReadFile(filepath.Join(root, Dir, keyName))
		if err != nil {
			t.Fatal(err)
		}
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			t.Fatal(err)
		}
		served := ssh.FingerprintSHA256(signer.PublicKey())
		for i := range callers {
			if errs[i] != nil || fps[i] != served {
				t.Fatalf("round %d caller %d: reported %q (%v); sshd would serve %s", round, i, fps[i], errs[i], served)
			}
		}
	}
}
