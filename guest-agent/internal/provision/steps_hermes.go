package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// HermesStages are the installer stages the box runs, in order; the
// browser, node and interactive stages never run.
var HermesStages = []string{"repository", "venv", "python-deps", "path", "config", "complete"}

// hermesStageTimeout bounds each installer stage and the uv sync.
const hermesStageTimeout = 20 * time.Minute

func (p *Provisioner) hermesEnv() []string {
	return []string{"HERMES_HOME=" + p.path(boxlayout.HermesHome)}
}

func (p *Provisioner) hermesMarker() file {
	return file{Path: boxlayout.HermesTree + "/.hermes-box-install", Data: []byte("commit=" + p.cfg.Pins.HermesCommit + "\n"), Mode: 0o644}
}

func checkHermes(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(p.hermesMarker())
	if err != nil {
		return Status{}, err
	}
	if len(s) == 0 && exists(p.path(boxlayout.HermesCLI)) {
		return Status{}, nil
	}
	return Status{Pending: []string{fmt.Sprintf("install Hermes %s with its installer (stages %s)", p.cfg.Pins.HermesCommit, strings.Join(HermesStages, ", "))}}, nil
}

// applyHermes downloads the installer at the pinned commit, verified, and
// runs it stage by stage, each under its own timeout.
func applyHermes(ctx context.Context, p *Provisioner) error {
	installer, err := p.fetch(ctx, "hermes", "Hermes installer", p.cfg.Pins.Installer)
	if err != nil {
		return err
	}
	for _, stage := range HermesStages {
		_, err := p.run(ctx, "hermes", command.Command{
			Path: "/bin/bash",
			Args: []string{installer, "--non-interactive", "--hermes-home", p.path(boxlayout.HermesHome),
				"--commit", p.cfg.Pins.HermesCommit, "--stage", stage},
			Env:     p.hermesEnv(),
			Timeout: hermesStageTimeout,
		})
		if err != nil {
			return fmt.Errorf("installer stage %s: %w", stage, err)
		}
		p.info("hermes", "installer stage "+stage+" done")
	}
	for _, want := range []string{boxlayout.HermesVenv + "/bin/python", boxlayout.HermesCLI} {
		if !exists(p.path(want)) {
			return fmt.Errorf("the installer finished but %s is missing: %w", want, errNotInstalled)
		}
	}
	return p.writeFile(p.hermesMarker())
}

// --- gated approval --------------------------------------------------------

// GateTarget is the installed Hermes the approval gate applies to. Paths
// are guest paths; join them to Root. User, when set, is the account
// Hermes' own code runs as when the gate asks it for its settings.
type GateTarget struct {
	Root   string
	Source string
	Python string
	Config string
	Commit string
	User   string
	Runner command.Runner
}

// GatePatcher puts the approval gate in (guest-agent/internal/gate).
type GatePatcher interface {
	// Pending lists what Apply would change; empty when patched.
	Pending(ctx context.Context, t GateTarget) ([]string, error)
	Apply(ctx context.Context, t GateTarget) error
	// Check runs the gate's health check as the box's health verb runs it
	// (t.User is the hermes account), failing unless the gate is active;
	// the verdict it keeps answers the box's first health check.
	Check(ctx context.Context, t GateTarget) error
}

func (p *Provisioner) gateTarget() GateTarget {
	// Hermes is asked as root here: its home still belongs to root until the
	// cleanup step hands it (and anything the probe wrote) to hermes.
	return GateTarget{Root: p.cfg.Root, Source: boxlayout.HermesTree, Python: boxlayout.HermesVenv + "/bin/python",
		Config: boxlayout.HermesConfig, Commit: p.cfg.Pins.HermesCommit, Runner: p.cfg.Runner}
}

// GateMissing is the reason the gated-approval step gives while no
// patcher is wired in.
const GateMissing = "the gated-approval patch is not part of this build yet; Hermes keeps its stock approval gate"

func checkGate(ctx context.Context, p *Provisioner) (Status, error) {
	if p.cfg.Gate == nil {
		return Status{Skip: GateMissing}, nil
	}
	defer protocol.Heartbeat(p.emit, "gated-approval")()
	s, err := p.cfg.Gate.Pending(ctx, p.gateTarget())
	return Status{Pending: s}, err
}

// applyGate reports a heartbeat while it works: Hermes' own code runs
// several times (its bytecode, the patch suite, the probe), minutes under
// emulation, saying nothing.
func applyGate(ctx context.Context, p *Provisioner) error {
	defer protocol.Heartbeat(p.emit, "gated-approval")()
	return p.cfg.Gate.Apply(ctx, p.gateTarget())
}

// smokeGate runs the gate check as hermes once cleanup has handed Hermes'
// home to that account, as every health check of the box will.
func (p *Provisioner) smokeGate(ctx context.Context) error {
	if p.cfg.Gate == nil {
		return nil
	}
	defer protocol.Heartbeat(p.emit, "smoke")()
	t := p.gateTarget()
	t.User = boxlayout.ServiceUser
	if err := p.cfg.Gate.Check(ctx, t); err != nil {
		return fmt.Errorf("smoke check: the approval gate as %s: %w", t.User, err)
	}
	return nil
}

// --- uv sync ---------------------------------------------------------------

func (p *Provisioner) uvSyncMarker() file {
	return file{Path: boxlayout.HermesTree + "/.hermes-box-uv-sync", Mode: 0o644,
		Data: fmt.Appendf(nil, "commit=%s extras=all,messaging uv=%s\n", p.cfg.Pins.HermesCommit, p.cfg.Pins.UVVersion)}
}

func checkUVSync(_ context.Context, p *Provisioner) (Status, error) {
	s, err := p.fileStatus(p.uvSyncMarker())
	if err != nil || len(s) == 0 {
		return Status{}, err
	}
	return Status{Pending: []string{"uv sync --extra all --extra messaging --locked in " + boxlayout.HermesTree}}, nil
}

// applyUVSync adds the messaging extras from the lockfile, hash-checked.
func applyUVSync(ctx context.Context, p *Provisioner) error {
	_, err := p.run(ctx, "uv-sync", command.Command{
		Path:    p.path(uvBin + "/uv"),
		Args:    []string{"sync", "--extra", "all", "--extra", "messaging", "--locked"},
		Dir:     p.path(boxlayout.HermesTree),
		Env:     append(p.hermesEnv(), "VIRTUAL_ENV="+p.path(boxlayout.HermesVenv), "UV_PROJECT_ENVIRONMENT="+p.path(boxlayout.HermesVenv)),
		Timeout: hermesStageTimeout,
	})
	if err != nil {
		return err
	}
	return p.writeFile(p.uvSyncMarker())
}

// --- .env ------------------------------------------------------------------

const staleTimeoutLine = "HERMES_CODEX_EVENT_STALE_TIMEOUT_SECONDS=120"

const hermesDotEnv = boxlayout.HermesHome + "/.env"

func (p *Provisioner) dotEnv() (file, bool, error) {
	b, err := readOptional(p.path(hermesDotEnv))
	if err != nil {
		return file{}, false, fmt.Errorf("reading %s: %w", hermesDotEnv, err)
	}
	has := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "HERMES_CODEX_EVENT_STALE_TIMEOUT_SECONDS=") {
			has = true
		}
	}
	if !has {
		if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
			b = append(b, '\n')
		}
		b = append(b, staleTimeoutLine+"\n"...)
	}
	return file{Path: hermesDotEnv, Data: b, Mode: 0o600, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}, has, nil
}

func checkHermesEnv(_ context.Context, p *Provisioner) (Status, error) {
	f, _, err := p.dotEnv()
	if err != nil {
		return Status{}, err
	}
	s, err := p.fileStatus(f)
	return Status{Pending: s}, err
}

// applyHermesEnv appends the Codex stale-event timeout unless the user's
// .env already sets one; the file's other lines (secrets) are kept as is.
func applyHermesEnv(_ context.Context, p *Provisioner) error {
	f, _, err := p.dotEnv()
	if err != nil {
		return err
	}
	return p.writeFile(f)
}

// --- cleanup ---------------------------------------------------------------

// cleanupPaths are build leftovers the image does not need.
var cleanupPaths = []string{
	"/root/.cache", "/root/.npm", boxlayout.CacheDir,
	boxlayout.HermesTree + "/.git", boxlayout.HermesTree + "/apps", boxlayout.HermesTree + "/tests", boxlayout.HermesTree + "/website",
}

// hermesTrees must belong to hermes throughout.
var hermesTrees = []string{boxlayout.ServiceHome, boxlayout.HermesHome, boxlayout.WorkDir, boxlayout.CodexHome}

// rootTrees are what Hermes imports at start besides its source tree: its
// venv must be root's and writable by no one else, so that code the
// hermes user drops there (a .pth file in site-packages runs in every
// Hermes process) cannot change the gate inside Hermes.
var rootTrees = []string{boxlayout.HermesVenv}

func checkCleanup(_ context.Context, p *Provisioner) (Status, error) {
	var pending []string
	for _, c := range cleanupPaths {
		if exists(p.path(c)) {
			pending = append(pending, "remove "+c)
		}
	}
	for _, t := range hermesTrees {
		foreign, err := p.firstForeign(t, boxlayout.ServiceUID, 0)
		if err != nil {
			return Status{}, err
		}
		if foreign != "" {
			pending = append(pending, "chown -R hermes:hermes "+t+" (for example "+foreign+")")
		}
	}
	for _, t := range rootTrees {
		foreign, err := p.firstForeign(t, rootID, 0o022)
		if err != nil {
			return Status{}, err
		}
		if foreign != "" {
			pending = append(pending, "chown -R root:root "+t+" and chmod -R go-w (for example "+foreign+")")
		}
	}
	return Status{Pending: pending}, nil
}

// firstForeign returns the first path under the guest tree not owned by
// id:id, or (not a symlink) with a permission bit of deny set, or "".
func (p *Provisioner) firstForeign(tree string, id int, deny fs.FileMode) (string, error) {
	var found string
	err := filepath.WalkDir(p.path(tree), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		u, g, err := p.cfg.Owner.Owner(path)
		if err == nil && d.Type()&fs.ModeSymlink == 0 && deny != 0 {
			var fi fs.FileInfo
			if fi, err = d.Info(); err == nil && fi.Mode().Perm()&deny != 0 {
				u = -1
			}
		}
		if err != nil || u != id || g != id {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("checking the owner of %s: %w", tree, err)
	}
	return found, nil
}

func applyCleanup(_ context.Context, p *Provisioner) error {
	for _, c := range cleanupPaths {
		if err := os.RemoveAll(p.path(c)); err != nil {
			return fmt.Errorf("removing %s: %w", c, err)
		}
	}
	for _, t := range hermesTrees {
		if err := p.chownTree(t, boxlayout.ServiceUID, 0); err != nil {
			return fmt.Errorf("handing %s to hermes: %w", t, err)
		}
	}
	for _, t := range rootTrees {
		if err := p.chownTree(t, rootID, 0o022); err != nil {
			return fmt.Errorf("handing %s to root: %w", t, err)
		}
	}
	return nil
}

// chownTree gives every path under the guest tree to id:id and clears the
// permission bits of deny (symlinks keep theirs).
func (p *Provisioner) chownTree(tree string, id int, deny fs.FileMode) error {
	return filepath.WalkDir(p.path(tree), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.cfg.Owner.Lchown(path, id, id); err != nil || deny == 0 || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err != nil || fi.Mode().Perm()&deny == 0 {
			return err
		}
		return os.Chmod(path, fi.Mode().Perm()&^deny|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
}

// --- smoke checks ----------------------------------------------------------

func checkSmoke(_ context.Context, p *Provisioner) (Status, error) {
	if exists(p.path(boxlayout.SmokeMarker)) {
		return Status{}, nil
	}
	return Status{Pending: []string{"run the smoke checks (hermes, discord, node, npm, tmux, terminfo, sshd)"}}, nil
}

// smokeCommands prove the image works before it is packed.
func (p *Provisioner) smokeCommands() []command.Command {
	asHermes := func(args ...string) command.Command {
		return command.Command{Path: "runuser", Args: append([]string{"-u", "hermes", "--"}, args...),
			Env: append(p.hermesEnv(), "HOME="+boxlayout.ServiceHome), Timeout: 2 * time.Minute}
	}
	keygen := []string{"-A"}
	sshdTest := []string{"-t"}
	if p.cfg.Root != "/" {
		keygen = append(keygen, "-f", p.cfg.Root)
		sshdTest = append(sshdTest, "-f", p.path("/etc/ssh/sshd_config"))
	}
	return []command.Command{
		asHermes(p.path(boxlayout.HermesCLI), "--version"),
		asHermes(p.path(boxlayout.HermesVenv+"/bin/python"), "-c", "import discord"),
		{Path: p.path("/usr/local/bin/node"), Args: []string{"--version"}, Timeout: time.Minute},
		{Path: p.path("/usr/local/bin/npm"), Args: []string{"--version"}, Timeout: 2 * time.Minute},
		{Path: "tmux", Args: []string{"-V"}, Timeout: time.Minute},
		{Path: "infocmp", Args: []string{"tmux-256color"}, Timeout: time.Minute},
		{Path: "infocmp", Args: []string{"xterm-256color"}, Timeout: time.Minute},
		{Path: "ssh-keygen", Args: keygen, Timeout: time.Minute},
		{Path: "/usr/sbin/sshd", Args: sshdTest, Timeout: time.Minute},
	}
}

func applySmoke(ctx context.Context, p *Provisioner) error {
	if err := os.MkdirAll(p.path("/run/sshd"), 0o755); err != nil {
		return fmt.Errorf("creating /run/sshd: %w", err)
	}
	if err := p.runAll(ctx, "smoke", p.smokeCommands()); err != nil {
		return fmt.Errorf("smoke check: %w", err)
	}
	if err := p.smokeGate(ctx); err != nil {
		return err
	}
	if err := p.ensureDir(seedDir); err != nil {
		return err
	}
	return p.writeFile(file{Path: boxlayout.SmokeMarker, Data: []byte("ok\n"), Mode: 0o600})
}

// --- workspace seed --------------------------------------------------------

// The seed (boxlayout.SeedArchive): smolvm 1.0.4's pack does not keep the
// builder's /workspace disk, so the image carries a tar of it that first
// boot unpacks. wsID marks the workspace the seed was made from.
const wsID = boxlayout.Workspace + "/.hermes-box-snapshot-id"

var seedDir = dir{Path: boxlayout.StateDir, Mode: 0o700}

func checkSeed(_ context.Context, p *Provisioner) (Status, error) {
	a, errA := os.ReadFile(p.path(boxlayout.SeedID))
	b, errB := os.ReadFile(p.path(wsID))
	if errA == nil && errB == nil && bytes.Equal(a, b) && exists(p.path(boxlayout.SeedArchive)) {
		return Status{}, nil
	}
	return Status{Pending: []string{"archive " + boxlayout.Workspace + " into " + boxlayout.SeedArchive}}, nil
}

func applySeed(ctx context.Context, p *Provisioner) error {
	if err := p.ensureDir(seedDir); err != nil {
		return err
	}
	old, _ := filepath.Glob(p.path(seedDir.Path + "/runtime-ownership-*"))
	for _, o := range old {
		if err := os.RemoveAll(o); err != nil {
			return fmt.Errorf("removing %s: %w", o, err)
		}
	}
	id := fmt.Sprintf("base-%d-%d\n", p.cfg.Now().Unix(), os.Getpid())
	if err := p.writeFile(file{Path: wsID, Data: []byte(id), Mode: 0o600}); err != nil {
		return err
	}
	if err := atomicfile.WriteFrom(p.path(boxlayout.SeedArchive), func(w io.Writer) error {
		return tarfs.Write(ctx, w, p.path(boxlayout.Workspace), tarfs.WriteOptions{Owner: p.cfg.Owner.Owner})
	}, 0o600); err != nil {
		return fmt.Errorf("archiving the workspace: %w", err)
	}
	if err := p.setAttrs(boxlayout.SeedArchive, 0o600, rootID, rootID); err != nil {
		return err
	}
	return p.writeFile(file{Path: boxlayout.SeedID, Data: []byte(id), Mode: 0o600})
}

// --- finalize --------------------------------------------------------------

// finalGlobs are removed last: host keys so every runtime generates its own,
// and apt lists to keep the image small.
var finalGlobs = []string{"/etc/ssh/ssh_host_*", "/var/lib/apt/lists/*"}

func (p *Provisioner) finalMatches() ([]string, error) {
	var out []string
	for _, g := range finalGlobs {
		m, err := filepath.Glob(p.path(g))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

func checkFinalize(_ context.Context, p *Provisioner) (Status, error) {
	m, err := p.finalMatches()
	if err != nil || len(m) == 0 {
		return Status{}, err
	}
	return Status{Pending: []string{fmt.Sprintf("remove %d SSH host key and apt list files", len(m))}}, nil
}

func applyFinalize(_ context.Context, p *Provisioner) error {
	m, err := p.finalMatches()
	if err != nil {
		return err
	}
	for _, path := range m {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("removing %s: %w", path, err)
		}
	}
	return nil
}
