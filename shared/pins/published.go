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
	codexNotPackage  = "the guest installs Codex's standalone package (codex-package-<triple>.tar.gz), whose SHA-256 for 0.171.0 no source here publishes; npm's tarball is another artifact, so Codex stays 0.141.0"
)

// PublishedDigests are the digests known for releases newer than the
// defaults. uv 0.13.8 has none here (no published SHA-256 of its
// uv-<triple>.tar.gz was found), so uv stays 0.11.21.
var PublishedDigests = []PublishedDigest{
	{Artifact: "hermes-installer", Version: "0.21.5", Algorithm: "sha256",
		Digest: "2017ddf0cc7bc6cfb70d40dc9fba1d916f47dbcccf5fe73bdee2cf93a11262af",
		Source: "scripts/install.sh at f97608f178d1ffeca59860195ab7da295f7c8e5f, from another project's pins (galleonlabs/boomkin src/hermes.ts), not checked here",
		Unused: hermesUnreadable},
	{Artifact: "hermes-installer", Version: "0.21.3", Algorithm: "sha256",
		Digest: "38547c22f4dd2224ba68a13bc3479309abb17e295b2a2ef79c2d1b8293bd822e",
		Source: "scripts/install.sh at 345cd2b057a452236de401d3534b8502a7465e8d, from another project's pins (galleonlabs/boomkin src/hermes.ts), not checked here",
		Unused: hermesUnreadable},
	{Artifact: "codex-npm", Version: "0.171.0", Algorithm: "sha512",
		Digest: "sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg==",
		Source: "the npm registry, `npm view @openai/codex@0.171.0 dist.integrity` (2026-11-29)", Unused: codexNotPackage},
	{Artifact: "codex-npm", Version: "0.171.0", Platform: "linux-arm64", Algorithm: "sha512",
		Digest: "sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA==",
		Source: "the npm registry, `npm view @openai/codex@0.171.0-linux-arm64 dist.integrity` (2026-11-29)", Unused: codexNotPackage},
	{Artifact: "codex-npm", Version: "0.171.0", Platform: "linux-x64", Algorithm: "sha512",
		Digest: "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==",
		Source: "the npm registry, `npm view @openai/codex@0.171.0-linux-x64 dist.integrity` (2026-11-29)", Unused: codexNotPackage},
}
