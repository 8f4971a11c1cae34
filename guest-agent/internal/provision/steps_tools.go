package provision

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// --- Node ----------------------------------------------------------------

var nodeTools = []string{"node", "npm", "npx", "corepack"}

func (p *Provisioner) nodeDir() string {
	return fmt.Sprintf("/usr/local/lib/nodejs/node-v%d", p.cfg.Pins.NodeMajor)
}

func (p *Provisioner) nodeLayout() ([]dir, []link) {
	dirs := []dir{
		{Path: boxlayout.ServiceHome + "/.local", Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
		{Path: boxlayout.ServiceHome + "/.local/bin", Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	}
	var links []link
	for _, t := range nodeTools {
		target := p.nodeDir() + "/bin/" + t
		links = append(links,
			link{Path: "/usr/local/bin/" + t, Target: target},
			link{Path: boxlayout.ServiceHome + "/.local/bin/" + t, Target: target, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID})
	}
	return dirs, links
}

func checkNode(_ context.Context, p *Provisioner) (Status, error) {
	var pending []string
	if !exists(p.path(p.nodeDir() + "/.hermes-box-node")) {
		pending = append(pending, fmt.Sprintf("install Node %d from %s into %s", p.cfg.Pins.NodeMajor, p.cfg.Pins.NodeDist, p.nodeDir()))
	}
	dirs, links := p.nodeLayout()
	s, err := p.collect(dirs, nil, links)
	return Status{Pending: append(pending, s...)}, err
}

func applyNode(ctx context.Context, p *Provisioner) error {
	if !exists(p.path(p.nodeDir() + "/.hermes-box-node")) {
		if err := p.installNode(ctx); err != nil {
			return err
		}
	}
	dirs, links := p.nodeLayout()
	return p.put(dirs, nil, links)
}

// installNode picks the release tarball from the release's SHASUMS256.txt,
// downloads it verified against that list, and swaps it into place.
func (p *Provisioner) installNode(ctx context.Context) error {
	sums, err := p.cfg.Fetcher.Get(ctx, p.cfg.Pins.NodeDist+"SHASUMS256.txt", 1<<20)
	if err != nil {
		return fmt.Errorf("fetching the Node checksum list: %w", err)
	}
	name, sum, err := PickNode(sums, p.cfg.Pins.NodeMajor, p.cfg.Pins.Arch)
	if err != nil {
		return err
	}
	archive, err := p.fetch(ctx, "node", name, Artifact{URL: p.cfg.Pins.NodeDist + name, SHA256: sum})
	if err != nil {
		return err
	}
	final := p.path(p.nodeDir())
	staged, err := stagingDir(final)
	if err != nil {
		return err
	}
	defer os.RemoveAll(staged)
	if err := p.extractTarGz(archive, staged, extractOpts{strip: 1}); err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(staged, "bin", "node")); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s has no bin/node", name)
	}
	marker := fmt.Sprintf("%s sha256=%s\n", name, sum)
	if err := os.WriteFile(filepath.Join(staged, ".hermes-box-node"), []byte(marker), 0o644); err != nil {
		return fmt.Errorf("marking the Node install: %w", err)
	}
	if err := p.cfg.Owner.Lchown(filepath.Join(staged, ".hermes-box-node"), rootID, rootID); err != nil {
		return err
	}
	if err := os.Chmod(staged, 0o755); err != nil {
		return err
	}
	if err := p.cfg.Owner.Lchown(staged, rootID, rootID); err != nil {
		return err
	}
	if err := swapIn(staged, final); err != nil {
		return err
	}
	p.info("node", "installed "+name)
	return nil
}

// PickNode finds the one linux tarball of major for arch in a SHASUMS256
// list and returns its file name and digest.
func PickNode(sums []byte, major int, arch pins.Arch) (string, string, error) {
	nodeArch := map[pins.Arch]string{pins.ARM64: "arm64", pins.AMD64: "x64"}[arch]
	if nodeArch == "" {
		return "", "", fmt.Errorf("no Node build for architecture %q", arch)
	}
	want := regexp.MustCompile(fmt.Sprintf(`^node-v%d\.[0-9]+\.[0-9]+-linux-%s\.tar\.gz$`, major, nodeArch))
	var name, sum string
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !want.MatchString(f[1]) {
			continue
		}
		if !sha256Hex.MatchString(f[0]) {
			return "", "", fmt.Errorf("SHASUMS256.txt line %d: malformed digest for %s", n, f[1])
		}
		if name != "" {
			return "", "", fmt.Errorf("SHASUMS256.txt lists more than one tarball for Node %d on %s: %s and %s", major, nodeArch, name, f[1])
		}
		name, sum = f[1], f[0]
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading SHASUMS256.txt: %w", err)
	}
	if name == "" {
		return "", "", fmt.Errorf("SHASUMS256.txt lists no node-v%d.x.y-linux-%s.tar.gz", major, nodeArch)
	}
	return name, sum, nil
}

// --- uv ------------------------------------------------------------------

const uvBin = boxlayout.HermesHome + "/bin"

func (p *Provisioner) uvMarker() file {
	return file{Path: uvBin + "/.hermes-box-uv", Data: fmt.Appendf(nil, "uv %s sha256=%s\n", p.cfg.Pins.UVVersion, p.cfg.Pins.UV.SHA256),
		Mode: 0o644, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}
}

var uvBinDir = dir{Path: uvBin, Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}

func checkUV(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.collect([]dir{uvBinDir}, []file{p.uvMarker()}, nil)
	if err != nil {
		return Status{}, err
	}
	for _, b := range []string{"uv", "uvx"} {
		if !exists(p.path(uvBin + "/" + b)) {
			s = append(s, "install "+uvBin+"/"+b)
		}
	}
	if len(s) > 0 {
		s = append([]string{"install uv " + p.cfg.Pins.UVVersion + " (sha256 " + p.cfg.Pins.UV.SHA256 + ")"}, s...)
	}
	return Status{Pending: s}, nil
}

// applyUV places the pinned uv where the Hermes installer looks first, so
// the installer reuses it instead of fetching its own.
func applyUV(ctx context.Context, p *Provisioner) error {
	archive, err := p.fetch(ctx, "uv", "uv "+p.cfg.Pins.UVVersion, p.cfg.Pins.UV)
	if err != nil {
		return err
	}
	if err := p.ensureDir(uvBinDir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(p.path(uvBin), ".uv-extract-")
	if err != nil {
		return fmt.Errorf("creating a directory to unpack uv: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := p.extractTarGz(archive, tmp, extractOpts{strip: 1, uid: boxlayout.ServiceUID, gid: boxlayout.ServiceUID}); err != nil {
		return err
	}
	for _, b := range []string{"uv", "uvx"} {
		if fi, err := os.Lstat(filepath.Join(tmp, b)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("the uv archive has no executable %s", b)
		}
	}
	for _, b := range []string{"uv", "uvx"} {
		if err := os.Rename(filepath.Join(tmp, b), p.path(uvBin+"/"+b)); err != nil {
			return fmt.Errorf("installing %s: %w", b, err)
		}
	}
	out, err := p.run(ctx, "uv", command.Command{Path: p.path(uvBin + "/uv"), Args: []string{"--version"}, Timeout: time.Minute})
	if err == nil && !strings.HasPrefix(string(out.Stdout), "uv "+p.cfg.Pins.UVVersion) {
		err = fmt.Errorf("uv --version printed %q; want uv %s", strings.TrimSpace(string(out.Stdout)), p.cfg.Pins.UVVersion)
	}
	if err != nil {
		_ = os.Remove(p.path(uvBin + "/uv"))
		_ = os.Remove(p.path(uvBin + "/uvx"))
		return err
	}
	return p.writeFile(p.uvMarker())
}

// --- Codex ---------------------------------------------------------------

const (
	codexStandalone = boxlayout.CodexHome + "/packages/standalone"
	codexReleases   = codexStandalone + "/releases"
)

// codexManifest is the part of codex-package.json that is checked.
type codexManifest struct {
	Version    string `json:"version"`
	Target     string `json:"target"`
	Entrypoint string `json:"entrypoint"`
}

func (p *Provisioner) codexRelease() string {
	return p.cfg.Pins.CodexVersion + "-" + p.cfg.Pins.CodexTarget
}

// readCodexManifest reads and checks the manifest of an unpacked package.
func (p *Provisioner) readCodexManifest(pkgDir string) (codexManifest, error) {
	b, err := os.ReadFile(filepath.Join(pkgDir, "codex-package.json"))
	if err != nil {
		return codexManifest{}, fmt.Errorf("reading codex-package.json: %w", err)
	}
	var m codexManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return codexManifest{}, fmt.Errorf("codex-package.json: %w", err)
	}
	if m.Version != p.cfg.Pins.CodexVersion || m.Target != p.cfg.Pins.CodexTarget {
		return m, fmt.Errorf("codex-package.json: field version/target is %q/%q; want %q/%q", m.Version, m.Target, p.cfg.Pins.CodexVersion, p.cfg.Pins.CodexTarget)
	}
	if m.Entrypoint == "" {
		m.Entrypoint = "bin/codex"
	}
	clean := path.Clean(m.Entrypoint)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return m, fmt.Errorf("codex-package.json: field entrypoint %q leaves the package", m.Entrypoint)
	}
	if fi, err := os.Stat(filepath.Join(pkgDir, clean)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return m, fmt.Errorf("codex package: entrypoint %s is not an executable file", clean)
	}
	m.Entrypoint = clean
	return m, nil
}

func (p *Provisioner) codexLayout(entrypoint string) ([]dir, []link) {
	dirs := []dir{
		{Path: boxlayout.CodexHome + "/packages", Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
		{Path: codexStandalone, Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
		{Path: codexReleases, Mode: 0o755, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	}
	links := []link{
		{Path: codexStandalone + "/current", Target: "releases/" + p.codexRelease(), UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
		{Path: boxlayout.CodexHome + "/bin/codex", Target: "../packages/standalone/current/" + entrypoint, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID},
	}
	return dirs, links
}

func checkCodex(_ context.Context, p *Provisioner) (Status, error) {
	var pending []string
	m, err := p.readCodexManifest(p.path(codexReleases + "/" + p.codexRelease()))
	if err != nil {
		pending = append(pending, "install Codex "+p.codexRelease()+" (sha256 "+p.cfg.Pins.Codex.SHA256+")")
		m.Entrypoint = "bin/codex"
	}
	dirs, links := p.codexLayout(m.Entrypoint)
	s, err := p.collect(dirs, nil, links)
	return Status{Pending: append(pending, s...)}, err
}

// applyCodex unpacks the standalone package the npm tarball carries into
// its release directory and points `current` at it with an atomic rename,
// the layout `codex update` maintains itself.
func applyCodex(ctx context.Context, p *Provisioner) error {
	final := p.path(codexReleases + "/" + p.codexRelease())
	m, err := p.readCodexManifest(final)
	if err != nil {
		if m, err = p.installCodex(ctx, final); err != nil {
			return err
		}
	}
	dirs, links := p.codexLayout(m.Entrypoint)
	return p.put(dirs, nil, links)
}

// codexVoice is the part of the package left out: the realtime voice
// host and its GStreamer and GLib libraries (about 50 MB unpacked), for
// microphone input the box has no device for.
const codexVoice = "codex-resources/voice"

// codexPackageDir is where the npm platform tarball keeps the standalone
// package of target.
func codexPackageDir(target string) string { return "package/vendor/" + target }

// codexSkip keeps the standalone package of target and what leads to it,
// less its voice resources: codex-package.json, bin/ (codex and
// codex-code-mode-host, which Codex runs for code mode), codex-path/ (rg,
// which Codex prefers to one on PATH) and codex-resources/ (bwrap, the
// Linux sandbox's). The npm package's own package.json and README, and any
// other target's directory, are skipped.
func codexSkip(target string) func(rel string) bool {
	pkg := codexPackageDir(target)
	return func(rel string) bool {
		if rel == "package" || rel == "package/vendor" || rel == pkg {
			return false
		}
		inner, ok := strings.CutPrefix(rel, pkg+"/")
		return !ok || inner == codexVoice || strings.HasPrefix(inner, codexVoice+"/")
	}
}

// installCodex unpacks the verified npm tarball's standalone package into
// a staging directory beside final and renames it into place once its
// manifest names the pinned version and target.
func (p *Provisioner) installCodex(ctx context.Context, final string) (codexManifest, error) {
	archive, err := p.fetch(ctx, "codex", "codex "+p.codexRelease(), p.cfg.Pins.Codex)
	if err != nil {
		return codexManifest{}, err
	}
	dirs, _ := p.codexLayout("")
	if err := p.put(dirs, nil, nil); err != nil {
		return codexManifest{}, err
	}
	staged, err := stagingDir(final)
	if err != nil {
		return codexManifest{}, err
	}
	defer os.RemoveAll(staged)
	target := p.cfg.Pins.CodexTarget
	if err := p.extractTarGz(archive, staged, extractOpts{uid: boxlayout.ServiceUID, gid: boxlayout.ServiceUID, skip: codexSkip(target)}); err != nil {
		return codexManifest{}, err
	}
	pkg := filepath.Join(staged, filepath.FromSlash(codexPackageDir(target)))
	if fi, err := os.Lstat(pkg); err != nil || !fi.IsDir() {
		return codexManifest{}, fmt.Errorf("the Codex archive has no %s/ (another architecture's tarball?)", codexPackageDir(target))
	}
	m, err := p.readCodexManifest(pkg)
	if err != nil {
		return m, err
	}
	if err := os.Chmod(pkg, 0o755); err != nil {
		return m, err
	}
	if err := p.cfg.Owner.Lchown(pkg, boxlayout.ServiceUID, boxlayout.ServiceUID); err != nil {
		return m, err
	}
	if err := swapIn(pkg, final); err != nil {
		return m, err
	}
	p.info("codex", "installed codex "+p.codexRelease())
	return m, nil
}

var codexConfig = file{Path: boxlayout.CodexHome + "/config.toml", Data: asset("codex-config.toml"), Mode: 0o600, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}

// errNotInstalled marks a post-condition an installer did not meet.
var errNotInstalled = errors.New("not installed")
