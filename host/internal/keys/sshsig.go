package keys

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The SSH signature format of OpenSSH's PROTOCOL.sshsig, as `ssh-keygen -Y
// sign` writes it and `ssh-keygen -Y verify` checks it: a signature over
// the hash of a message, bound to a namespace so a signature made for one
// purpose is not valid for another.
const (
	sigMagic   = "SSHSIG"
	sigVersion = 1
	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
	// armorWidth is the base64 line length ssh-keygen writes.
	armorWidth = 70
	// SigHash is the hash algorithm Sign uses (ssh-keygen's default).
	SigHash = "sha512"
	// maxArmored bounds a signature file read whole.
	maxArmored = 64 << 10
)

// ErrBadSignature marks a signature that does not verify or cannot be read.
var ErrBadSignature = errors.New("bad SSH signature")

// Signature is a parsed SSH signature.
type Signature struct {
	PublicKey ssh.PublicKey
	Namespace string
	Hash      string // "sha256" or "sha512"
	Sig       *ssh.Signature
}

// sigBlob is the armored blob after the magic preamble.
type sigBlob struct {
	Version   uint32
	PublicKey []byte
	Namespace string
	Reserved  string
	Hash      string
	Signature []byte
}

// signedData is what the key signs.
type signedData struct {
	Namespace string
	Reserved  string
	Hash      string
	Digest    []byte
}

// Sign signs message with signer for namespace and returns the armored
// signature, byte for byte what `ssh-keygen -Y sign -n namespace` writes
// for the same key and message (ed25519 signatures are deterministic).
func Sign(signer ssh.Signer, namespace string, message io.Reader) ([]byte, error) {
	if namespace == "" {
		return nil, errors.New("signing: empty namespace")
	}
	digest, err := digestOf(SigHash, message)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	sig, err := signData(signer, toSign(namespace, SigHash, digest))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	blob := ssh.Marshal(sigBlob{Version: sigVersion, PublicKey: signer.PublicKey().Marshal(),
		Namespace: namespace, Hash: SigHash, Signature: ssh.Marshal(sig)})
	return armor(append([]byte(sigMagic), blob...)), nil
}

// signData signs with the SHA-512 RSA algorithm where the key is RSA, as
// ssh-keygen does (SHA-1 "ssh-rsa" signatures are refused by verifiers).
func signData(signer ssh.Signer, data []byte) (*ssh.Signature, error) {
	if as, ok := signer.(ssh.AlgorithmSigner); ok && signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		return as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512)
	}
	return signer.Sign(rand.Reader, data)
}

// Verify checks the armored signature over message for namespace and
// returns the key that made it. The caller decides whether it trusts that
// key.
func Verify(armored []byte, namespace string, message io.Reader) (ssh.PublicKey, error) {
	s, err := ParseSignature(armored)
	if err != nil {
		return nil, err
	}
	if s.Namespace != namespace {
		return nil, fmt.Errorf("%w: made for namespace %q, want %q", ErrBadSignature, s.Namespace, namespace)
	}
	digest, err := digestOf(s.Hash, message)
	if err != nil {
		return nil, fmt.Errorf("verifying the signature: %w", err)
	}
	if err := s.PublicKey.Verify(toSign(namespace, s.Hash, digest), s.Sig); err != nil {
		return nil, fmt.Errorf("%w: it does not match the signed data (made by %s): %w", ErrBadSignature, Fingerprint(s.PublicKey), err)
	}
	return s.PublicKey, nil
}

// ParseSignature reads an armored SSH signature without verifying it.
func ParseSignature(armored []byte) (*Signature, error) {
	raw, err := dearmor(armored)
	if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(raw, []byte(sigMagic))
	if !ok {
		return nil, fmt.Errorf("%w: no %s preamble", ErrBadSignature, sigMagic)
	}
	var b sigBlob
	if err := ssh.Unmarshal(rest, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if b.Version != sigVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadSignature, b.Version, sigVersion)
	}
	if b.Hash != "sha256" && b.Hash != "sha512" {
		return nil, fmt.Errorf("%w: hash algorithm %q, want sha256 or sha512", ErrBadSignature, b.Hash)
	}
	pub, err := ssh.ParsePublicKey(b.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrBadSignature, err)
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(b.Signature, &sig); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", ErrBadSignature, err)
	}
	if sig.Format == ssh.KeyAlgoRSA {
		return nil, fmt.Errorf("%w: SHA-1 RSA signature (ssh-rsa)", ErrBadSignature)
	}
	return &Signature{PublicKey: pub, Namespace: b.Namespace, Hash: b.Hash, Sig: &sig}, nil
}

func toSign(namespace, hashAlg string, digest []byte) []byte {
	return append([]byte(sigMagic), ssh.Marshal(signedData{Namespace: namespace, Hash: hashAlg, Digest: digest})...)
}

func digestOf(alg string, message io.Reader) ([]byte, error) {
	var h hash.Hash
	switch alg {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("unknown hash algorithm %q", alg)
	}
	if _, err := io.Copy(h, message); err != nil {
		return nil, fmt.Errorf("hashing the message: %w", err)
	}
	return h.Sum(nil), nil
}

// armor wraps blob as ssh-keygen does: base64 lines of 70 characters
// between the BEGIN and END lines.
func armor(blob []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(blob)
	var b bytes.Buffer
	b.WriteString(armorBegin + "\n")
	for len(enc) > armorWidth {
		b.WriteString(enc[:armorWidth] + "\n")
		enc = enc[armorWidth:]
	}
	b.WriteString(enc + "\n" + armorEnd + "\n")
	return b.Bytes()
}

// dearmor reads the BEGIN line, base64 lines and the END line; nothing
// but white space may follow.
func dearmor(armored []byte) ([]byte, error) {
	if len(armored) > maxArmored {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadSignature, maxArmored)
	}
	text := strings.ReplaceAll(string(armored), "\r\n", "\n")
	body, ok := strings.CutPrefix(text, armorBegin+"\n")
	if !ok {
		return nil, fmt.Errorf("%w: does not start with %q", ErrBadSignature, armorBegin)
	}
	body, tail, ok := strings.Cut(body, armorEnd)
	if !ok {
		return nil, fmt.Errorf("%w: no %q line", ErrBadSignature, armorEnd)
	}
	if strings.TrimSpace(tail) != "" {
		return nil, fmt.Errorf("%w: text after %q", ErrBadSignature, armorEnd)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(body, "\n", ""))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	return raw, nil
}
