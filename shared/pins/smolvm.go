package pins

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ExtractLayout is where `machine create --from` puts a pack's layers.
type ExtractLayout string

// The extraction layouts of the supported releases.
const (
	// ExtractPrivate: `<data-dir>/pack/` with `.smolvm-extracted`, subject
	// to the extraction cache's size cap (SMOLVM_PACK_CACHE_MAX_BYTES).
	ExtractPrivate ExtractLayout = "private"
	// ExtractSharedOnLinux: on Linux the layers go to the node's shared
	// store `_shared/<crc32>/`, `<data-dir>/pack/` stays empty and
	// `<data-dir>/.pack-shared` holds the shared directory's absolute path
	// (src/artifact_cache.rs, crates/smolvm-pack/src/extract.rs);
	// SMOLVM_DISABLE_SHARED_EXTRACT restores ExtractPrivate. Elsewhere as
	// ExtractPrivate.
	ExtractSharedOnLinux ExtractLayout = "shared-on-linux"
)

// SmolvmRelease is one smolvm release hermes-box drives, with what it can do.
// Code asks these fields; it never compares version strings.
type SmolvmRelease struct {
	Version string
	// Extract is where create --from puts the layers.
	Extract ExtractLayout
	// EgressFloorVar: SMOLVM_EGRESS_FLOOR=strict is honoured
	// (crates/smolvm-network/src/egress.rs, from 1.3.9).
	EgressFloorVar bool
	// DefaultFloorStrict: without any variable the guest reaches neither
	// the LAN nor the host (1.0.4); from 1.1.3 only cloud metadata is floored.
	DefaultFloorStrict bool
	// HostLoopbackAlias: without the strict floor the guest reaches the
	// host's loopback services through 100.96.0.1 / host.smolvm.internal
	// (1.7.2–1.12.x).
	HostLoopbackAlias bool
	// AllowListOnCreateFrom: --allow-host/--allow-cidr/
	// --outbound-localhost-only are kept and enforced for `create --from`
	// (run_from_smolmachine; from 1.8.0; 1.0.4 drops them).
	AllowListOnCreateFrom bool
	// SecretRefsOnCreateFrom: --secret-env reaches a machine created
	// --from. False on every release read: run_from_smolmachine keeps only
	// the manifest's secret refs.
	SecretRefsOnCreateFrom bool
	// LargeExecStdin: `machine exec -i` with large input works (from 1.8.1,
	// #931). Before, the client stops reading output while it writes an
	// input frame and fails with EAGAIN when a write makes no progress for
	// 10 s, so output while input flows, or a command that stops reading
	// for 10 s, ends the session; the restore's relay then holds the
	// agent's output until the input ends.
	LargeExecStdin bool
	// EgressEvents: `machine egress-events` lists denials (from 1.8.1).
	EgressEvents bool
	// CopyMode: `machine cp --mode` sets an upload's mode (from 1.9.0).
	CopyMode bool
	// FrozenState: `frozen` is a machine state (fork bases).
	FrozenState bool
	// SeccompArches are the Linux architectures (GOARCH names) on which
	// SMOLVM_SECCOMP=enforce has the VMM process (`_boot-vm`) install its
	// syscall allow-list before it loads libkrun, failing closed
	// (src/cli/internal_boot.rs: x86_64 from 1.0.4, aarch64 from 1.3.8).
	// Unset, the VMM runs unconfined on every release.
	SeccompArches []string
	// LandlockVar: SMOLVM_LANDLOCK=enforce confines the VMM's view of the
	// host's files with Landlock on Linux, failing closed; unset means off.
	LandlockVar bool
	// ExportHelperMemoryVar: `pack create --from-vm` boots its helper VM
	// with SMOLVM_EXPORT_HELPER_MEMORY_MIB MiB (from 1.16.2; before, a
	// fixed 4096, or on Linux half the available memory if less, at
	// least 1024).
	ExportHelperMemoryVar bool
}

// ExportHelperMemoryMiB is the memory hermes-box gives `pack create`'s
// helper VM where the release takes it (ExportHelperMemoryVar): the helper
// only exports the stopped machine's disks, and a smaller guest boots
// inside smolvm's fixed 30 s wait on a busy host where 4096 MiB may not
// (smolvm itself goes down to 1024 on a host short of memory).
const ExportHelperMemoryMiB = 2048

// VMMConfinement says which of smolvm's VMM confinements the release
// applies on goos/goarch when asked: seccomp and Landlock exist only on
// Linux (macOS runs the VMM under Hypervisor.framework's own sandboxing).
func (r SmolvmRelease) VMMConfinement(goos, goarch string) (seccomp, landlock bool) {
	if goos != "linux" {
		return false, false
	}
	for _, a := range r.SeccompArches {
		if a == goarch {
			seccomp = true
		}
	}
	return seccomp, r.LandlockVar
}

// NetworkModesEnforced says whether `strict` and `none` can be offered: the
// allow-list and localhost-only flags are enforced for create --from and
// the floor keeps the LAN and the host out.
func (r SmolvmRelease) NetworkModesEnforced() bool {
	return r.AllowListOnCreateFrom && (r.EgressFloorVar || r.DefaultFloorStrict)
}

// SmolvmReleases is the table of supported smolvm releases, oldest first.
// Facts read in smol-machines/smolvm at each tag.
var SmolvmReleases = []SmolvmRelease{
	{Version: "1.0.4", Extract: ExtractPrivate, DefaultFloorStrict: true, SeccompArches: []string{"amd64"}, LandlockVar: true},
	smolvm19("1.9.0"),
	smolvm19("1.9.1"),
	smolvm19("1.9.2"),
	smolvm19("1.9.3"),
}

func smolvm19(v string) SmolvmRelease {
	return SmolvmRelease{Version: v, Extract: ExtractSharedOnLinux, EgressFloorVar: true, HostLoopbackAlias: true,
		AllowListOnCreateFrom: true, LargeExecStdin: true, EgressEvents: true, CopyMode: true, FrozenState: true,
		SeccompArches: []string{"amd64", "arm64"}, LandlockVar: true}
}

// SmolvmRecommended is the release the install instructions name.
const SmolvmRecommended = "1.9.3"

// SmolvmArchive is one release archive of smolvm with its SHA-256 and
// where that digest was read.
type SmolvmArchive struct {
	Version  string
	Platform string // smolvm's name: darwin-arm64, linux-x86_64, linux-arm64
	SHA256   string
	Source   string
}

// smolvmTap193 is the tap commit whose formula is 1.9.3 ("Update smolvm to
// 1.9.3", 2026-08-22).
const smolvmTap193 = "smol-machines/homebrew-tap Formula/smolvm.rb at 256309b6bed556d871031928f1e915c902bbcf16"

// SmolvmArchives are the release archives whose digests are known: the
// install instructions check what they download against them. upstream's
// install.sh checks an archive only when the release's checksums.sha256
// downloads, and otherwise warns and installs it (smolvm #227, open).
var SmolvmArchives = []SmolvmArchive{
	{"1.9.3", "darwin-arm64", "5a84cfadd28f78b11010927ab1bbf6726ccfeb303c16c9cfd55498d0b1df09e9", smolvmTap193},
	{"1.9.3", "linux-arm64", "2d32c1dbe1e9cf88395ea2c099ec04de0828f76e1f28ceb69ae20cce8c62a83e", smolvmTap193},
	{"1.9.3", "linux-x86_64", "072e49e41b9bc4d6d3c0806e051ddf94e2af7e4d21915b040fe7e3f185fe0104", smolvmTap193},
}

// SmolvmTap is the Homebrew tap whose formula carries the per-archive
// SHA-256s that brew checks.
const SmolvmTap = "smol-machines/tap/smolvm"

// SmolvmInstallCommand is how to install smolvm version on this host, in a
// way that verifies what it installs (SmolvmInstallFor).
func SmolvmInstallCommand(version string) string {
	return SmolvmInstallFor(runtime.GOOS, runtime.GOARCH, version)
}

// SmolvmInstallFor is how to install smolvm version on goos/goarch: on
// macOS Homebrew's tap (brew checks the archive's SHA-256 from the
// formula); on Linux the release archive, checked against its SHA-256
// from SmolvmArchives before it is unpacked into ~/.smolvm (the layout
// upstream's installer uses) and linked into ~/.local/bin.
func SmolvmInstallFor(goos, goarch, version string) string {
	if goos == "darwin" {
		return "brew install " + SmolvmTap + " (Homebrew checks the archive's SHA-256 from the tap's formula; the tap installs its current release: if smolvm --version is not " +
			version + ", qualify that release with hermes-box doctor)"
	}
	platform := "linux-" + map[string]string{"amd64": "x86_64", "arm64": "arm64"}[goarch]
	file := "smolvm-" + version + "-" + platform + ".tar.gz"
	url := "https://github.com/smol-machines/smolvm/releases/download/v" + version + "/" + file
	check := "sha256sum -c smolvm.sha256"
	sum := ""
	for _, a := range SmolvmArchives {
		if a.Version == version && a.Platform == platform {
			sum = a.SHA256
		}
	}
	if sum == "" {
		return "download " + url + " and check it against the release's checksums.sha256 before unpacking it into ~/.smolvm"
	}
	return "cd \"$(mktemp -d)\" && curl -fsSLo " + file + " " + url + " && echo '" + sum + "  " + file + "' > smolvm.sha256 && " + check +
		" && mkdir -p ~/.smolvm ~/.local/bin && tar -xzf " + file + " -C ~/.smolvm --strip-components=1 && ln -sf ~/.smolvm/smolvm ~/.local/bin/smolvm"
}

// ErrUnsupportedSmolvm is returned for a smolvm release not in the table.
var ErrUnsupportedSmolvm = errors.New("unsupported smolvm release")

// Smolvm returns the row of version. An unlisted version is refused with
// the table, the install command and the way to qualify it on this host,
// unless beyond is set (hermes-box doctor qualifying it, or a binary it
// qualified) and version is newer than every row: then the row is
// SmolvmBeyond's, with unlisted set.
func Smolvm(version string, beyond bool) (r SmolvmRelease, unlisted bool, err error) {
	for _, r := range SmolvmReleases {
		if r.Version == version {
			return r, false, nil
		}
	}
	newest := SmolvmReleases[len(SmolvmReleases)-1]
	if beyond && versionLess(newest.Version, version) {
		return SmolvmBeyond(version), true, nil
	}
	hint := "install a supported release: " + SmolvmInstallCommand(SmolvmRecommended)
	if versionLess(newest.Version, version) {
		hint += " (or qualify this newer release on this host with the disposable test `hermes-box doctor`; a release that passes is accepted for that binary)"
	}
	return SmolvmRelease{}, false, fmt.Errorf("%w %q\n%s%s", ErrUnsupportedSmolvm, version, SmolvmTable(), hint)
}

// SmolvmLater is what is known of the releases after the table's newest,
// from reports and single indexed files (reference/upstream-today.md),
// oldest first. SmolvmBeyond applies what changes a capability; doctor
// measures the rest on the user's host.
var SmolvmLater = []struct {
	Since string
	Note  string
	apply func(*SmolvmRelease)
}{
	{"1.13.0", "the default egress floor no longer lets a guest reach the host's loopback (PR #1060), the LAN still; hermes-box still passes the strict floor",
		func(r *SmolvmRelease) { r.HostLoopbackAlias = false }},
	{"1.16.2", "pack create --from-vm's helper VM memory is settable (SMOLVM_EXPORT_HELPER_MEMORY_MIB); hermes-box passes ExportHelperMemoryMiB",
		func(r *SmolvmRelease) { r.ExportHelperMemoryVar = true }},
	{"1.22.0", "exec reworked: doctor checks exit statuses, --timeout and a large exec -i", nil},
	{"1.22.2", "pack create --from-vm reported to drop extended attributes", nil},
	{"1.25.4", "newest release seen; machines can be paused and pausing (machine pause/resume), ls/status JSON gains keys", nil},
}

// SmolvmBeyond is the row hermes-box drives a release newer than the
// table with: the newest row's capabilities, with the later changes known
// for that version applied.
func SmolvmBeyond(version string) SmolvmRelease {
	r := SmolvmReleases[len(SmolvmReleases)-1]
	r.Version = version
	r.SeccompArches = slices.Clone(r.SeccompArches)
	for _, l := range SmolvmLater {
		if l.apply != nil && !versionLess(version, l.Since) {
			l.apply(&r)
		}
	}
	return r
}

// SmolvmTable renders the table as text: one row per release, the
// capabilities hermes-box relies on.
func SmolvmTable() string {
	var b strings.Builder
	b.WriteString("supported smolvm releases:\n")
	b.WriteString("  version  extract          LAN+host by default  strict floor var  strict/none modes  large exec -i  helper mem var  VMM confinement (Linux)\n")
	for _, r := range SmolvmReleases {
		exposed := "no"
		if !r.DefaultFloorStrict {
			exposed = "LAN"
			if r.HostLoopbackAlias {
				exposed = "LAN, host loopback"
			}
		}
		fmt.Fprintf(&b, "  %-8s %-16s %-20s %-17s %-18s %-14s %-15s %s\n", r.Version, r.Extract, exposed,
			yesNo(r.EgressFloorVar), yesNo(r.NetworkModesEnforced()), yesNo(r.LargeExecStdin), yesNo(r.ExportHelperMemoryVar), confinementText(r))
	}
	return b.String()
}

// confinementText names the confinements the release has on Linux.
func confinementText(r SmolvmRelease) string {
	var parts []string
	if len(r.SeccompArches) > 0 {
		parts = append(parts, "seccomp ("+strings.Join(r.SeccompArches, ", ")+")")
	}
	if r.LandlockVar {
		parts = append(parts, "Landlock")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " + ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// versionLess compares dotted numeric versions; a malformed one is never
// newer than anything.
func versionLess(a, b string) bool {
	pa, okA := versionParts(a)
	pb, okB := versionParts(b)
	if !okA || !okB {
		return false
	}
	for i := range 3 {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

func versionParts(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// SmolvmTableVersions lists the supported releases, comma-separated.
func SmolvmTableVersions() string {
	vs := make([]string, 0, len(SmolvmReleases))
	for _, r := range SmolvmReleases {
		vs = append(vs, r.Version)
	}
	return strings.Join(vs, ",")
}
