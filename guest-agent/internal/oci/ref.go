package oci

import (
	"fmt"
	"strings"
)

// Reference is an image reference pinned by tag and digest, such as
// ghcr.io/owner/executor-selfhost:v1.5.12@sha256:<64 hex>.
type Reference struct {
	// Repository is the registry host and path, without tag or digest.
	Repository string
	// Tag is the human-readable tag; it does not select the content.
	Tag string
	// Digest is "sha256:" and 64 lowercase hex digits.
	Digest string
}

// ParseReference accepts only NAME:TAG@sha256:<64 lowercase hex>.
func ParseReference(s string) (Reference, error) {
	name, hex, ok := strings.Cut(s, "@sha256:")
	if !ok || !isDigestHex(hex) {
		return Reference{}, fmt.Errorf("image reference %q: must end in @sha256:<64 lowercase hex>", s)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return Reference{}, fmt.Errorf("image reference %q: must not contain whitespace", s)
	}
	slash := strings.LastIndexByte(name, '/')
	repo, tag, ok := strings.Cut(name[slash+1:], ":")
	if slash <= 0 || !ok || repo == "" || tag == "" {
		return Reference{}, fmt.Errorf("image reference %q: must be REGISTRY/REPOSITORY:TAG@sha256:<digest>", s)
	}
	return Reference{Repository: name[:slash+1] + repo, Tag: tag, Digest: "sha256:" + hex}, nil
}

// String is the full reference with tag and digest.
func (r Reference) String() string { return r.Repository + ":" + r.Tag + "@" + r.Digest }

// Canonical is the repository and digest without the tag: two references
// that differ only by tag name the same content.
func (r Reference) Canonical() string { return r.Repository + "@" + r.Digest }

// DigestHex is the digest without its algorithm prefix.
func (r Reference) DigestHex() string { return strings.TrimPrefix(r.Digest, "sha256:") }

// isDigestHex reports whether s is 64 lowercase hex digits.
func isDigestHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseDigest checks a "sha256:<hex>" digest and returns its hex part.
func parseDigest(d string) (string, error) {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || !isDigestHex(hex) {
		return "", fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", d)
	}
	return hex, nil
}
