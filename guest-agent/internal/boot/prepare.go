package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hostkeys"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// OwnershipWitness is the file whose owner shows whether the image's
// ownership needs repair.
const OwnershipWitness = "/usr/bin/sudo"

// Options is the per-boot preparation's environment.
type Options struct {
	// Root is the file system root ("/" in the box).
	Root string
	// Getenv reads the machine's environment; os.Getenv by default.
	Getenv func(string) string
	// Poll is the restore-mode marker's polling interval; 1 s by default.
	Poll time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// Hostname is the machine's name; os.Hostname by default.
	Hostname func() (string, error)
	// InstallCodex installs Codex into the workspace on the first boot
	// (the agent's cli wires provision's first-boot steps in); nil skips
	// the step.
	InstallCodex func(ctx context.Context, root string) (string, error)
}

func (o *Options) defaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Hostname == nil {
		o.Hostname = os.Hostname
	}
}

func (o *Options) path(rel string) string { return filepath.Join(o.Root, rel) }

// skipped marks a step that had nothing to do; its text says why.
type skipped string

func (s skipped) Error() string { return string(s) }

// Skipped is skipped for steps wired in from outside the package.
func Skipped(why string) error { return skipped(why) }

// codexInstall is the first-boot Codex step; what it does is
// Options.InstallCodex.
func codexInstall(ctx context.Context, o *Options) (string, error) {
	if o.InstallCodex == nil {
		return "", skipped("no Codex installer wired in")
	}
	return o.InstallCodex(ctx, o.Root)
}

// Step is one idempotent preparation step; Run returns what it did, or a
// skipped error when there was nothing to do.
type Step struct {
	Name string
	Run  func(ctx context.Context, o *Options) (string, error)
	// Soft steps log a failure and let the boot go on (the next boot
	// retries); health reports what they left undone.
	Soft bool
}

// Steps are the per-boot preparation, in order.
func Steps() []Step {
	return []Step{
		{"restore-wait", restoreWait, false},
		{"stray-files", strayFiles, false},
		{"ownership-repair", ownershipRepair, false},
		{"accounts", accountsRepair, false},
		{"sudo-modes", sudoModes, false},
		{"home-ownership", homeOwnership, false},
		{"ssh-modes", sshModes, false},
		{"hermes-home-link", hermesHomeLink, false},
		{"hosts", hostsEntry, false},
		{"host-keys", hostKeys, false},
		{"tmp-modes", tmpModes, false},
		{"run-dirs", runDirs, false},
		{"workspace-seed", workspaceSeed, false},
		{"workspace-ownership", workspaceOwnership, false},
		{"codex", codexInstall, true},
	}
}

// Prepare runs the steps in order and writes one line per step to the
// startup log ("<time> stage=<step> <ok|skipped|failed>: <message>"). It
// stops at the first failure.
func Prepare(ctx context.Context, o Options) error {
	o.defaults()
	logPath := o.path(boxlayout.StartupLog)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("creating the startup log's directory: %w", err)
	}
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the startup log: %w", err)
	}
	defer lf.Close()
	for _, s := range Steps() {
		msg, err := s.Run(ctx, &o)
		outcome := "ok"
		var skip skipped
		switch {
		case errors.As(err, &skip):
			outcome, msg, err = "skipped", skip.Error(), nil
		case err != nil:
			outcome, msg = "failed", err.Error()
		}
		logLine(lf, o.Now(), s.Name, outcome, msg)
		if err != nil && !s.Soft {
			return fmt.Errorf("boot step %s: %w", s.Name, err)
		}
	}
	return nil
}

func logLine(w io.Writer, t time.Time, stage, outcome, msg string) {
	msg = strings.ReplaceAll(msg, "\n", " ")
	fmt.Fprintf(w, "%s stage=%s %s: %s\n", t.UTC().Format(time.RFC3339), stage, outcome, msg)
}

// restoreWait blocks a machine created in restore mode until the restore
// has put its marker down: services must not start on a half-restored box.
func restoreWait(ctx context.Context, o *Options) (string, error) {
	if o.Getenv(boxlayout.EnvRestoreMode) != "true" {
		return "", skipped("not in restore mode")
	}
	begin := o.Now()
	marker := o.path(boxlayout.RestoreReady)
	t := time.NewTicker(o.Poll)
	defer t.Stop()
	for {
		if _, err := os.Stat(marker); err == nil {
			return fmt.Sprintf("restore-ready marker found after %s", o.Now().Sub(begin).Round(time.Second)), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s: %w", boxlayout.RestoreReady, ctx.Err())
		case <-t.C:
		}
	}
}

func hostKeys(_ context.Context, o *Options) (string, error) {
	keys, err := hostkeys.Ensure(o.Root)
	if err != nil {
		return "", err
	}
	var fps []string
	for _, k := range keys.Keys {
		fps = append(fps, k.Type+" "+k.Fingerprint)
	}
	return "host keys: " + strings.Join(fps, ", "), nil
}

// tmpModes makes /tmp and /var/tmp root's, world-writable and sticky.
func tmpModes(_ context.Context, o *Options) (string, error) {
	for _, d := range []string{"tmp", "var/tmp"} {
		p := o.path(d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", fmt.Errorf("creating /%s: %w", d, err)
		}
		if err := os.Lchown(p, 0, 0); err != nil && os.Geteuid() == 0 {
			return "", fmt.Errorf("chowning /%s: %w", d, err)
		}
		if err := os.Chmod(p, os.ModeSticky|0o777); err != nil {
			return "", fmt.Errorf("setting the mode of /%s: %w", d, err)
		}
	}
	return "/tmp and /var/tmp are 1777", nil
}

// runDirs creates the runtime directories the supervised programs need and
// that no init system makes for them: /run may be a fresh tmpfs at every
// boot, and sshd refuses to start without /run/sshd.
func runDirs(_ context.Context, o *Options) (string, error) {
	p := o.path("run/sshd")
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("creating /run/sshd: %w", err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		return "", fmt.Errorf("setting the mode of /run/sshd: %w", err)
	}
	return "/run/sshd is 0755", nil
}

// workspaceOwnership gives the service user its workspace trees. A tree
// whose top is already the user's is left alone; one that is not (a fresh
// seed, a remapped restore) is chowned throughout.
func workspaceOwnership(_ context.Context, o *Options) (string, error) {
	u, err := passwd.Lookup(o.Root, boxlayout.ServiceUser)
	if err != nil {
		return "", err
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{boxlayout.HermesHome, 0o700}, {boxlayout.WorkDir, 0o755}} {
		if err := os.MkdirAll(o.path(d.path), d.mode); err != nil {
			return "", fmt.Errorf("creating %s: %w", d.path, err)
		}
	}
	var fixed []string
	// The workspace's top is hermes' 0750 (a remapped pack leaves it the
	// host's, which locks hermes out of everything below).
	changed, err := ensureOwnerMode(o.path(boxlayout.Workspace), u.UID, u.GID, 0o750)
	if err != nil {
		return "", err
	}
	if changed {
		fixed = append(fixed, boxlayout.Workspace)
	}
	for _, tree := range []string{boxlayout.HermesHome, boxlayout.WorkDir, boxlayout.ExecutorDir, boxlayout.CodexHome} {
		n, err := chownTree(o.path(tree), u.UID, u.GID)
		if err != nil {
			return "", err
		}
		if n > 0 {
			fixed = append(fixed, fmt.Sprintf("%s (%d paths)", tree, n))
		}
	}
	if len(fixed) == 0 {
		return "", skipped(fmt.Sprintf("workspace trees already owned by %s", u.Name))
	}
	return fmt.Sprintf("chowned to %s: %s", u.Name, strings.Join(fixed, ", ")), nil
}

// chownTree chowns every path under top not owned by uid:gid, if top
// itself is not; it returns how many paths changed.
func chownTree(top string, uid, gid uint32) (int, error) {
	st, err := lstat(top)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if st.Uid == uid && st.Gid == gid {
		return 0, nil
	}
	return chownAll(top, uid, gid)
}

func lstat(p string) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return &st, nil
}

// lchownKeepMode chowns p and puts back the setuid/setgid bits that the
// kernel clears on chown.
func lchownKeepMode(p string, st *syscall.Stat_t, uid, gid int) error {
	if err := os.Lchown(p, uid, gid); err != nil {
		return err
	}
	special := st.Mode & (syscall.S_ISUID | syscall.S_ISGID)
	if special == 0 || st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	return syscall.Chmod(p, st.Mode&0o7777)
}
