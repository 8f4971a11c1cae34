package backup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/keys"
)

// FileSignature is the project key's SSH signature of SHA256SUMS, which
// names the hash of every other file (the manifest among them): checking
// it and then the sums authenticates the whole backup. OpenSSH alone
// checks it:
//
//	ssh-keygen -Y verify -f allowed_signers -I hermes-box -n hermes-box-backup@hermes-box -s SHA256SUMS.sig < SHA256SUMS
const FileSignature = "SHA256SUMS.sig"

// SignatureNamespace is the SSH signature namespace of backups: a
// signature the project key made for anything else does not verify as a
// backup's.
const SignatureNamespace = "hermes-box-backup@hermes-box"

// ErrUnsigned marks a backup without a signature (made before backups
// were signed), refused unless the caller vouches for it.
var ErrUnsigned = errors.New("backup is not signed")

// Trust is what a backup's signature must show.
type Trust struct {
	// Key is the project's public key, the only signer accepted; nil
	// accepts any signer (the signature still proves the files unchanged
	// since signing, not who made them).
	Key ssh.PublicKey
	// LegacyOK accepts an unsigned backup (--legacy-backup): its files
	// are checked against SHA256SUMS, which anyone can recompute.
	LegacyOK bool
}

// LegacySkips says what --legacy-backup gives up, for the user.
const LegacySkips = "the signature check is skipped: SHA256SUMS shows the files are whole, not who wrote them, " +
	"and the key fingerprint in its manifest is public; restore it only if you made it"

// SignSums signs the bytes of SHA256SUMS with the project key.
func SignSums(signer ssh.Signer, sums []byte) ([]byte, error) {
	return keys.Sign(signer, SignatureNamespace, bytes.NewReader(sums))
}

// checkSignature verifies dir's signature of sums (SHA256SUMS exactly as
// read) and returns the signer and the signature, nil for an unsigned
// backup t accepts.
func (t Trust) checkSignature(dir string, sums []byte) (ssh.PublicKey, []byte, error) {
	sig, err := readSmall(filepath.Join(dir, FileSignature))
	if errors.Is(err, fs.ErrNotExist) {
		if t.LegacyOK {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("%w: %s: %s is missing; a backup made before backups were signed restores with --legacy-backup (%s)",
			ErrUnsigned, dir, FileSignature, LegacySkips)
	}
	if err != nil {
		return nil, nil, err
	}
	signer, err := keys.Verify(sig, SignatureNamespace, bytes.NewReader(sums))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %s: %w", ErrInvalid, dir, FileSignature, err)
	}
	if t.Key != nil && !bytes.Equal(signer.Marshal(), t.Key.Marshal()) {
		return nil, nil, fmt.Errorf("%w: %s is signed by %s, this project's key is %s", ErrForeign, dir,
			keys.Fingerprint(signer), keys.Fingerprint(t.Key))
	}
	return signer, sig, nil
}

// checkOrigin ties the manifest to the signature: a signed backup's
// manifest records its signer; an unsigned one's the project key (or
// none, made before fingerprints were recorded).
func (t Trust) checkOrigin(m Manifest, signer ssh.PublicKey) error {
	if signer != nil {
		if m.Fingerprint != keys.Fingerprint(signer) {
			return fmt.Errorf("%w: %s records %s, but %s is signed by %s", ErrInvalid, FileManifest, m.Fingerprint, FileSignature, keys.Fingerprint(signer))
		}
		return nil
	}
	if t.Key == nil {
		return nil
	}
	return CheckOrigin(m, keys.Fingerprint(t.Key), t.LegacyOK)
}

// signedSums is a backup's SHA256SUMS whose signature was checked.
type signedSums struct {
	sums   Sums
	raw    []byte        // SHA256SUMS as read and signed
	sig    []byte        // the signature; nil when unsigned
	signer ssh.PublicKey // nil when unsigned
}

// readSignedSums reads dir's SHA256SUMS and checks its signature before
// anything else of the backup is read.
func (t Trust) readSignedSums(dir string) (signedSums, error) {
	var s signedSums
	fi, err := os.Lstat(dir)
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !fi.IsDir() {
		return s, fmt.Errorf("%w: %s is not a directory", ErrInvalid, dir)
	}
	if s.raw, err = readSmall(filepath.Join(dir, FileSums)); err != nil {
		return s, err
	}
	if s.signer, s.sig, err = t.checkSignature(dir, s.raw); err != nil {
		return s, err
	}
	if s.sums, err = ParseSums(s.raw); err != nil {
		return s, fmt.Errorf("%w: %s: %w", ErrInvalid, dir, err)
	}
	return s, nil
}
