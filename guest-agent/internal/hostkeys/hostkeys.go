// Package hostkeys creates the guest's SSH host keys when they are missing
// and reports their fingerprints, so the host can pin the key out of band.
package hostkeys

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Dir is where sshd looks for host keys, relative to the root.
const Dir = "etc/ssh"

// keyName is the ed25519 host key's file name; it is the only type created.
const keyName = "ssh_host_ed25519_key"

// lockName is the lock file that makes creating the key exclusive.
const lockName = ".hermes-box-hostkeys.lock"

// Ensure creates the ed25519 host key under root if it is missing and
// returns every host key found, so the host can pin one. Boot and the
// host's out-of-band `hostkeys` run at the same time on a first boot: an
// exclusive lock makes exactly one of them create the key, and the other
// report that same key.
func Ensure(root string) (protocol.HostKeys, error) {
	dir := filepath.Join(root, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return protocol.HostKeys{}, fmt.Errorf("creating %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return protocol.HostKeys{}, fmt.Errorf("opening the host key lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return protocol.HostKeys{}, fmt.Errorf("locking the host keys: %w", err)
	}
	priv := filepath.Join(dir, keyName)
	if _, err := os.Stat(priv); errors.Is(err, fs.ErrNotExist) {
		if err := generate(priv); err != nil {
			return protocol.HostKeys{}, err
		}
	} else if err != nil {
		return protocol.HostKeys{}, fmt.Errorf("checking %s: %w", priv, err)
	}
	return List(root)
}

// List reads the public host keys under root.
func List(root string) (protocol.HostKeys, error) {
	dir := filepath.Join(root, Dir)
	matches, err := filepath.Glob(filepath.Join(dir, "ssh_host_*_key.pub"))
	if err != nil {
		return protocol.HostKeys{}, fmt.Errorf("listing host keys: %w", err)
	}
	out := protocol.HostKeys{Keys: []protocol.HostKey{}}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			return out, fmt.Errorf("reading host key: %w", err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			return out, fmt.Errorf("parsing host key %s: %w", m, err)
		}
		out.Keys = append(out.Keys, protocol.HostKey{
			Type:        pub.Type(),
			Path:        "/" + filepath.ToSlash(strings.TrimPrefix(m, filepath.Clean(root)+string(filepath.Separator))),
			Fingerprint: ssh.FingerprintSHA256(pub),
			PublicKey:   strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))),
		})
	}
	return out, nil
}

// generate writes a new ed25519 key pair, private key first; each file is
// written atomically so sshd never sees half a key.
func generate(privPath string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return fmt.Errorf("encoding host key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return fmt.Errorf("encoding host public key: %w", err)
	}
	if err := atomicfile.Write(privPath, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("writing host key: %w", err)
	}
	if err := atomicfile.Write(privPath+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		return fmt.Errorf("writing host public key: %w", err)
	}
	return nil
}
