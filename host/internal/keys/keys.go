// Package keys owns the host's SSH key material: the project's ed25519
// client key, the pinned host key of each box, and known_hosts lines for the
// system ssh client. It uses golang.org/x/crypto/ssh only and never runs
// ssh-keygen. Every file is written atomically (temporary file in the same
// directory, fsync, rename), so a crash leaves the old file or the new one,
// never half of either.
package keys

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// PubSuffix is appended to a private key's path to name its public key.
const PubSuffix = ".pub"

// EnsureProjectKey returns the signer of the ed25519 private key at path,
// creating the key first if path does not exist. A new key is written in
// OpenSSH format with mode 0600, its public half as one authorized_keys line
// (carrying comment) at path+".pub" with mode 0644; a missing parent
// directory is created with mode 0700.
//
// An existing key is refused if it is readable by group or others, if it is
// not an unencrypted ed25519 key, or if path+".pub" holds another key. A
// missing .pub is written again from the private key.
func EnsureProjectKey(path, comment string) (ssh.Signer, error) {
	if strings.ContainsAny(comment, "\r\n") {
		return nil, errors.New("key comment must be a single line")
	}
	signer, err := loadPrivateKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		signer, err = createPrivateKey(path, comment)
	}
	if err != nil {
		return nil, err
	}
	if err := ensurePublicKey(path+PubSuffix, signer.PublicKey(), comment); err != nil {
		return nil, err
	}
	return signer, nil
}

// LoadProjectKey returns the signer of the existing project key at path,
// with the checks of EnsureProjectKey; it never creates one.
func LoadProjectKey(path string) (ssh.Signer, error) { return loadPrivateKey(path) }

// Fingerprint returns key's SHA-256 fingerprint as OpenSSH prints it,
// "SHA256:" and the unpadded base64 of the hash of the wire-format key.
func Fingerprint(key ssh.PublicKey) string {
	return ssh.FingerprintSHA256(key)
}

// loadPrivateKey reads and checks the private key at path. The error wraps
// fs.ErrNotExist when there is no file.
func loadPrivateKey(path string) (ssh.Signer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening private key: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checking private key: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("private key %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("private key %s is accessible by group or others (mode %04o); run chmod 600 on it", path, perm)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("reading private key %s: %w", path, err)
	}
	raw, err := ssh.ParseRawPrivateKey(buf.Bytes())
	if err != nil {
		// The parser's errors name the problem, never the key's bytes.
		return nil, fmt.Errorf("parsing private key %s: %w", path, err)
	}
	priv, ok := raw.(*ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key %s is a %T, want ed25519", path, raw)
	}
	signer, err := ssh.NewSignerFromKey(*priv)
	if err != nil {
		return nil, fmt.Errorf("using private key %s: %w", path, err)
	}
	return signer, nil
}

// createPrivateKey writes a new key at path without replacing a file that
// another process created meanwhile; if one did, that key is used instead.
func createPrivateKey(path, comment string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating ed25519 key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating key directory: %w", err)
	}
	err = atomicfile.WriteNew(path, pem.EncodeToMemory(block), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadPrivateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("writing private key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("using new private key: %w", err)
	}
	return signer, nil
}

// ensurePublicKey writes pub to path unless path already holds it, and
// refuses a file that holds another key.
func ensurePublicKey(path string, pub ssh.PublicKey, comment string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.Write(path, authorizedLine(pub, comment), 0o644); err != nil {
			return fmt.Errorf("writing public key: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading public key: %w", err)
	}
	got, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return fmt.Errorf("parsing public key %s: %w", path, err)
	}
	if !bytes.Equal(got.Marshal(), pub.Marshal()) {
		return fmt.Errorf("public key %s (%s) does not match its private key (%s); remove the .pub file to have it written again",
			path, Fingerprint(got), Fingerprint(pub))
	}
	return nil
}

// authorizedLine is pub as one authorized_keys line with an optional comment.
func authorizedLine(pub ssh.PublicKey, comment string) []byte {
	line := bytes.TrimSuffix(ssh.MarshalAuthorizedKey(pub), []byte("\n"))
	if comment != "" {
		line = append(line, ' ')
		line = append(line, comment...)
	}
	return append(line, '\n')
}
