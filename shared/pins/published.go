package pins

// PublishedDigest is a digest others publish for a release hermes-box does
// not install: kept as data with where it was read, so that moving a
// default is a reviewed change of one row, never a guess. No install path
// reads this table.
type PublishedDigest struct {
	Artifact  string
	Version   string
	Platform  string // "" when the artifact is the same everywhere
	Algorithm string // "sha256", or "sha512" for an npm integrity
	Digest    string // hex for sha256; npm's base64 integrity for sha512
	Source    string
	// Unused says why no default uses it.
	Unused string
}

const (
	hermesUnreadable = "Hermes 0.21.x is refused by name (RefusedHermesReleases): its source is not readable here, so its gate requirements are unchecked"
)

// PublishedDigests are the digests known for releases newer than the
// defaults. uv 0.13.8 has none here (no published SHA-256 of its
// uv-<triple>.tar.gz was found), so uv stays 0.11.21. Codex 0.171.0's npm
// integrities were rows here until Codex moved to the npm tarballs: the
// platform tarballs' are the Codex pin's Integrity now, the launcher
// package's own (@openai/codex@0.171.0, the JS shim) is dropped, nothing
// installs it.
var PublishedDigests = []PublishedDigest{
	{Artifact: "hermes-installer", Version: "0.21.5", Algorithm: "sha256",
		Digest: "2017ddf0cc7bc6cfb70d40dc9fba1d916f47dbcccf5fe73bdee2cf93a11262af",
		Source: "scripts/install.sh at f97608f178d1ffeca59860195ab7da295f7c8e5f, from another project's pins (galleonlabs/boomkin src/hermes.ts), not checked here",
		Unused: hermesUnreadable},
	{Artifact: "hermes-installer", Version: "0.21.3", Algorithm: "sha256",
		Digest: "38547c22f4dd2224ba68a13bc3479309abb17e295b2a2ef79c2d1b8293bd822e",
		Source: "scripts/install.sh at 345cd2b057a452236de401d3534b8502a7465e8d, from another project's pins (galleonlabs/boomkin src/hermes.ts), not checked here",
		Unused: hermesUnreadable},
}
