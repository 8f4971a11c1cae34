// Package pins is the one table of every artifact hermes-box pins: Hermes
// commits with their installer digest and approval-gate mechanism, uv, Node,
// Codex, the Executor image, the guest Ubuntu image and the supported smolvm
// releases with their capabilities (smolvm.go).
//
// A digest that is not known is recorded as unknown, never guessed: anything
// that would download such an artifact must refuse through Digest, whose
// error tells the user how to supply one.
package pins

import (
	"errors"
	"fmt"
	"strings"
)

// Arch is a guest CPU architecture, in Go's spelling.
type Arch string

// The guest architectures hermes-box builds an agent for.
const (
	ARM64 Arch = "arm64"
	AMD64 Arch = "amd64"
)

// SupportedGuestArch is the architecture every pin is verified for.
const SupportedGuestArch = ARM64

// UbuntuImage is the guest base image the builder starts from.
const UbuntuImage = "ubuntu:24.04"

// NodeMajor is the Node.js LTS line installed in the guest: 26, the Active
// LTS since 2026-10-28 (24 is in maintenance). Digest source: the tarball
// is verified against the SHA-256 the line's SHASUMS256.txt lists
// (https://nodejs.org/dist/latest-v26.x/), fetched over TLS at install;
// from Node 25 on the Linux builds need libatomic1, in the guest's packages.
const NodeMajor = 26

// DefaultHermesCommit is the Hermes commit a new box installs (0.19.0).
const DefaultHermesCommit = "3ef6bbd201263d354fd83ec55b3c306ded2eb72a"

// DefaultExecutorImage is the Executor image a new box pulls when enabled:
// the newest release whose digest a public source shows. Upstream publishes
// none (UsefulSoftwareCo/executor's publish workflow,
// .github/workflows/publish-selfhost-docker.yml, pushes each architecture by
// digest and keeps the digests as run artifacts only; no release note names
// one); v1.6.8's is pinned in a public NixOS configuration that runs it with
// the environment the agent sets. Its layout is recognised by what it holds
// (the agent refuses an image with neither known layout, and one of another
// platform), so a wrong guess fails closed at install, never at run time.
const DefaultExecutorImage = "ghcr.io/usefulsoftwareco/executor-selfhost:v1.6.8@sha256:527e014ce0641e9d569314561fba2a37b872ffd5074471b9bc48b66611ecb090"

// GateMechanism is how hermes-box puts its approval gate into one Hermes
// release. Code asks the release for its mechanism; it never compares
// version strings.
type GateMechanism string

// The gate mechanisms.
const (
	// GateSourcePatch adds approvals.mode "gated" to the tree with anchored
	// source edits and installs the reviewer module (guest-agent/internal/patch).
	GateSourcePatch GateMechanism = "source-patch"
	// GateSmartPlugin configures Hermes' own smart approvals (one command per
	// approval, the reviewer model from auxiliary.approval) and installs the
	// hermes-box-gate plugin on the approval hooks for the verdict floors, the
	// reason shown to the human and the audit record; what neither reaches
	// (the Codex service tier of the reviewer call, no yolo, container-
	// backend or headless-run shortcut past the approvals) is anchored source
	// edits.
	GateSmartPlugin GateMechanism = "smart-plugin"
)

// IntendedMode is approvals.mode as the installed Hermes must resolve it
// for the mechanism to be active.
func (m GateMechanism) IntendedMode() string {
	if m == GateSmartPlugin {
		return "smart"
	}
	return "gated"
}

// HermesRelease is one Hermes Agent commit hermes-box knows how to install
// and gate.
type HermesRelease struct {
	Commit          string
	Version         string
	InstallerSHA256 string
	// Mechanism is how the approval gate is put into this release.
	Mechanism GateMechanism
	// AnchorSet names the anchor set (guest-agent/internal/patch) of the
	// source edits the mechanism makes in this tree.
	AnchorSet string
	// ExternalSupervisor is true when `hermes gateway run` accepts
	// --external-supervisor (in-chat /restart and /update then exit back to
	// the box's supervisor instead of starting a detached gateway).
	ExternalSupervisor bool
	// PythonVersion is the CPython the installer has uv provision (its
	// PYTHON_VERSION); uv is the pinned UV below for every release.
	PythonVersion string
	// ManagedScope is true when Hermes reads the root-owned managed scope
	// (/etc/hermes/config.yaml, from 0.17.0): its keys win over the user's
	// config and `hermes config set` refuses them, so the gate's settings
	// are written there, out of the agent's reach.
	ManagedScope bool
}

// InstallerURL is the immutable address of the installer at this commit.
func (h HermesRelease) InstallerURL() string {
	return "https://raw.githubusercontent.com/NousResearch/hermes-agent/" + h.Commit + "/scripts/install.sh"
}

// HermesReleases lists the supported Hermes commits, the default first.
// Adding a release is one row here, its anchor set or requirement list in
// guest-agent/internal/gate, and its check on the real tree (docs/gate.md,
// "Adding a Hermes release").
var HermesReleases = []HermesRelease{
	{
		Commit:             DefaultHermesCommit,
		Version:            "0.19.0",
		InstallerSHA256:    "c5ba7e89627577fab914514736ecfb3359b66956ca00199bfef616ca35953cb9",
		Mechanism:          GateSmartPlugin,
		AnchorSet:          "hermes-0.19.0",
		ExternalSupervisor: true,
		PythonVersion:      "3.11",
		ManagedScope:       true,
	},
	{
		Commit:          "81eaedd0f5c471c7ee748990066135a684f3c962",
		Version:         "0.16.0",
		InstallerSHA256: "dbd9d555ed4ac67bd1fc71ba6a39b410cf2af0ebcfd8f4889e086af78c9ddcaa",
		Mechanism:       GateSourcePatch,
		AnchorSet:       "hermes-0.16.0",
		PythonVersion:   "3.11",
	},
	{
		Commit:          "2bd1977d8fad185c9b4be47884f7e87f1add0ce3",
		Version:         "0.17.0",
		InstallerSHA256: "dbd9d555ed4ac67bd1fc71ba6a39b410cf2af0ebcfd8f4889e086af78c9ddcaa",
		Mechanism:       GateSourcePatch,
		AnchorSet:       "hermes-0.17.0",
		PythonVersion:   "3.11",
		ManagedScope:    true,
	},
}

// RefusedHermes is a line of Hermes releases known not to take the gate.
type RefusedHermes struct {
	// VersionPrefix matches pyproject versions ("0.18." matches 0.18.x).
	VersionPrefix string
	Reason        string
}

// approvalSplit is what upstream did to the approval code after 0.19, and
// unverified why no tree of those lines is gated.
const (
	approvalSplit = "tools/approval.py was split into approval_smart.py, approval_gateway_wait.py, approval_prompt.py " +
		"and approval_context.py, so the smart-approval call, the gateway wait and the prompt the gate wraps moved or " +
		"were renamed, and the reviewer call's service tier is built elsewhere"
	unverified = "no byte-exact tree of this line has been verified against the gate's requirements, so nothing " +
		"can say it is gated"
)

// RefusedHermesReleases are refused by name, with the reason, so a tree
// whose anchors happen to match is still never gated. The error also names
// what to pin instead (HermesInstead).
var RefusedHermesReleases = []RefusedHermes{
	{VersionPrefix: "0.18.", Reason: "from 0.18.0 Hermes normalises approvals.mode to manual, smart or off, so the patched " +
		"\"gated\" mode silently becomes manual and the reviewer never runs; and 0.18's own smart mode approves a " +
		"pattern for the whole session (one-command approvals arrived in 0.19.0)"},
	{VersionPrefix: "0.20.", Reason: "the approval code was reorganised after 0.19 (by 0.21 " + approvalSplit + "); " + unverified},
	{VersionPrefix: "0.21.", Reason: "from 0.21 " + approvalSplit + "; " + unverified},
	{VersionPrefix: "0.22.", Reason: "as in 0.21, " + approvalSplit + "; " + unverified},
}

// HermesInstead is what a refused or unknown release should be replaced
// with: the supported releases, the default first, as the
// HERMES_BOX_HERMES_COMMIT setting takes them.
func HermesInstead() string {
	return "pin a supported release instead with HERMES_BOX_HERMES_COMMIT: " + strings.Join(hermesCommits(), ", ") +
		" (the first is the default)"
}

// ErrRefusedRelease is returned for a Hermes version the table refuses.
var ErrRefusedRelease = errors.New("refused Hermes release")

// HermesByVersion returns the supported release with version v, or an
// error naming why v is refused or which versions are supported.
func HermesByVersion(v string) (HermesRelease, error) {
	for _, r := range RefusedHermesReleases {
		if strings.HasPrefix(v, r.VersionPrefix) {
			return HermesRelease{}, fmt.Errorf("%w: Hermes %s: %s; %s", ErrRefusedRelease, v, r.Reason, HermesInstead())
		}
	}
	for _, h := range HermesReleases {
		if h.Version == v {
			return h, nil
		}
	}
	return HermesRelease{}, fmt.Errorf("%w version %q: supported releases are %s", ErrUnsupportedCommit, v, strings.Join(hermesCommits(), ", "))
}

// ErrUnsupportedCommit is returned for a Hermes commit not in the table.
var ErrUnsupportedCommit = errors.New("unsupported Hermes commit")

// Hermes returns the release pinned for commit.
func Hermes(commit string) (HermesRelease, error) {
	for _, h := range HermesReleases {
		if h.Commit == commit {
			return h, nil
		}
	}
	return HermesRelease{}, fmt.Errorf("%w %q: supported commits are %s", ErrUnsupportedCommit, commit, strings.Join(hermesCommits(), ", "))
}

func hermesCommits() []string {
	out := make([]string, 0, len(HermesReleases))
	for _, h := range HermesReleases {
		out = append(out, h.Commit+" ("+h.Version+")")
	}
	return out
}

// Artifact is a downloadable file pinned by version and, per architecture,
// by SHA-256. An architecture missing from SHA256 has no known digest.
type Artifact struct {
	Name    string
	Version string
	// URLs maps each architecture to its download address.
	URLs map[Arch]string
	// SHA256 maps each architecture to its lowercase hex digest.
	SHA256 map[Arch]string
	// Integrity maps each architecture to the digest the artifact's own
	// registry publishes for it, as the registry spells it (npm's
	// dist.integrity, "sha512-<base64>"), when that is not a SHA-256: the
	// record SHA256 was checked against. Downloads verify SHA256.
	Integrity map[Arch]string
	// DigestSource says where SHA256's digests come from and how they were
	// checked; a default moves only with it.
	DigestSource string
	// OverrideKey is the hermes-box.conf key that supplies a digest the
	// table does not know.
	OverrideKey string
}

// ErrUnknownDigest is returned for an artifact whose digest is not pinned
// for the requested architecture.
var ErrUnknownDigest = errors.New("no pinned sha256")

// Digest returns the pinned digest for arch, or override when the table has
// none. It refuses to return anything unverifiable.
func (a Artifact) Digest(arch Arch, override string) (string, error) {
	if d, ok := a.SHA256[arch]; ok {
		if override != "" && override != d {
			return "", fmt.Errorf("%s: %s %s for %s is pinned to sha256 %s; %s may not change a pinned digest", a.Name, a.Name, a.Version, arch, d, a.OverrideKey)
		}
		return d, nil
	}
	if override != "" {
		return override, nil
	}
	return "", fmt.Errorf("%w for %s %s on %s: download %s yourself, check it, and set %s=<sha256> in hermes-box.conf to use it",
		ErrUnknownDigest, a.Name, a.Version, arch, a.URL(arch), a.OverrideKey)
}

// URL returns the download address for arch, or "" when there is none.
func (a Artifact) URL(arch Arch) string { return a.URLs[arch] }

// UV is the pinned uv release. 0.11.22 deadlocked building Hermes; 0.11.23
// (aarch64 sha256 1873a77350f6621279ae1a0d2227f2bd8b67131598f14a7eb0ba2215d3da2c98)
// is known good too but not yet the default.
var UV = Artifact{
	Name:    "uv",
	Version: "0.11.21",
	URLs: map[Arch]string{
		ARM64: "https://github.com/astral-sh/uv/releases/download/0.11.21/uv-aarch64-unknown-linux-gnu.tar.gz",
		AMD64: "https://github.com/astral-sh/uv/releases/download/0.11.21/uv-x86_64-unknown-linux-gnu.tar.gz",
	},
	SHA256: map[Arch]string{
		ARM64: "88e800834007cc5efd4675f166eb2a51e7e3ad19876d85fa8805a6fb5c922397",
	},
	OverrideKey: "HERMES_BOX_UV_SHA256",
}

// Codex is the pinned Codex CLI: the npm registry's platform tarball of
// @openai/codex (the package's optionalDependencies @openai/codex-linux-x64
// and -linux-arm64 are npm:@openai/codex@<version>-linux-<arch>), which
// carries Codex's standalone package under package/vendor/<CodexTarget>/.
// 0.141.0 was GitHub's codex-package-<triple>.tar.gz, whose x86_64 digest
// no source here published; GitHub's release assets cannot be read from
// here, npm's can, with the registry's own integrity.
var Codex = Artifact{
	Name:    "codex",
	Version: "0.171.0",
	URLs: map[Arch]string{
		ARM64: "https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-arm64.tgz",
		AMD64: "https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-x64.tgz",
	},
	SHA256: map[Arch]string{
		ARM64: "26ae27788c7d962ae64321aba4673f918b99b40c4655246930bf962fa5b81b01",
		AMD64: "e13d67afb0533cc6160b5f4140e4ad07e2acd87adbaa081bbf69b82e90cf4e55",
	},
	Integrity: map[Arch]string{
		ARM64: "sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA==",
		AMD64: "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==",
	},
	DigestSource: "the npm registry's dist.integrity (sha512) of @openai/codex@0.171.0-linux-arm64 and -linux-x64 " +
		"(`npm view @openai/codex@0.171.0-linux-<arch> dist.tarball dist.integrity`, 2026-11-29), checked against " +
		"the downloaded tarballs (176,542,339 and 172,033,439 bytes); the SHA-256s computed from those tarballs",
	OverrideKey: "HERMES_BOX_CODEX_SHA256",
}

// CodexTarget is the Rust target triple of the Codex package for arch: the
// directory under package/vendor/ of the npm tarball, and the target in
// its codex-package.json.
func CodexTarget(arch Arch) string {
	if arch == AMD64 {
		return "x86_64-unknown-linux-musl"
	}
	return "aarch64-unknown-linux-musl"
}

// ExecutorImage is one known Executor image reference.
type ExecutorImage struct {
	Version   string
	Reference string
	Layout    string // "packaged" (dist-server, v1.5.17 on) or "workspace"
	Source    string // where the digest was shown
}

// ExecutorImages lists the Executor images whose digests are known, the
// default first.
var ExecutorImages = []ExecutorImage{
	{Version: "v1.6.8", Reference: DefaultExecutorImage, Layout: "packaged", Source: "a public NixOS configuration's pin"},
	{Version: "v1.5.12", Reference: "ghcr.io/rhyssullivan/executor-selfhost:v1.5.12@sha256:e40b2179c005b3124e794e9a8505341db46d0a9a1631e7f3fdcd023462ecf70b", Layout: "workspace", Source: "the image the first hermes-box release pinned"},
	{Version: "v1.5.16", Reference: "ghcr.io/rhyssullivan/executor-selfhost:v1.5.16@sha256:5d763c718b6567d56e0168d3c205065a37355da1468290f2030f7f6c792f02b6", Layout: "workspace", Source: "the legacy namespace's last tag before the packaged layout"},
}
