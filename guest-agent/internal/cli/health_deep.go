package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/guest-agent/internal/toolcheck"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// hermesEnv is the environment Hermes' own commands run with.
var hermesEnv = []string{"HOME=" + boxlayout.ServiceHome, "HERMES_HOME=" + boxlayout.HermesHome, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}

// toolChecks are the deep health checks: one per thing provisioning (or
// the first boot) installed, as the reference's smoke tests and start
// script prove them.
func toolChecks() []toolcheck.ToolCheck {
	return []toolcheck.ToolCheck{
		{Code: health.CheckHermesVersion, Files: []string{boxlayout.HermesCLI},
			Commands: [][]string{{boxlayout.HermesCLI, "--version"}}, User: boxlayout.ServiceUser, Env: hermesEnv},
		{Code: health.CheckHermesExtras, Files: []string{boxlayout.HermesVenv + "/bin/python"},
			Commands: [][]string{{boxlayout.HermesVenv + "/bin/python", "-c", "import discord"}}, User: boxlayout.ServiceUser, Env: hermesEnv},
		{Code: health.CheckNodeNPM, Files: []string{"/usr/local/bin/node", "/usr/local/bin/npm"},
			Commands: [][]string{{"/usr/local/bin/node", "--version"}, {"/usr/local/bin/npm", "--version"}}, User: boxlayout.ServiceUser, Env: hermesEnv},
		{Code: health.CheckTmuxTerminfo,
			Files: []string{"/usr/bin/tmux", "/usr/share/terminfo/t/tmux-256color|/lib/terminfo/t/tmux-256color",
				"/usr/share/terminfo/x/xterm-256color|/lib/terminfo/x/xterm-256color"},
			Commands: [][]string{{"/usr/bin/tmux", "-V"}, {"/usr/bin/infocmp", "tmux-256color"}, {"/usr/bin/infocmp", "xterm-256color"}},
			Env:      []string{"PATH=/usr/bin:/bin", "TERM=dumb"}},
		{Code: health.CheckCodexVersion, Files: []string{boxlayout.CodexHome + "/bin/codex", boxlayout.CodexHome + "/config.toml"},
			Commands: [][]string{{boxlayout.CodexHome + "/bin/codex", "--version"}}, User: boxlayout.ServiceUser,
			Env: append([]string{"CODEX_HOME=" + boxlayout.CodexHome}, hermesEnv...)},
	}
}

// executorCheck is the Executor's environment and active image, when the
// running boot says Executor is enabled: the image it runs is pinned by
// digest, and the active release (`current`) holds that digest.
func executorCheck(root string) (toolcheck.ToolCheck, bool) {
	o, err := boot.ReadBoxOptions(root)
	if err != nil || !o.ExecutorEnabled {
		return toolcheck.ToolCheck{}, false
	}
	return toolcheck.ToolCheck{Code: health.CheckExecutorImage, Files: []string{boxlayout.ExecutorDir},
		Cheap: func(root string) (string, error) { return activeImage(root, o.ExecutorImage) }}, true
}

func activeImage(root, image string) (string, error) {
	_, digest, ok := strings.Cut(image, "@")
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return "", fmt.Errorf("executor image %q is not pinned by digest", image)
	}
	cur := filepath.Join(root, boxlayout.ExecutorRuntimeDir, "current")
	target, err := os.Readlink(cur)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no active Executor release (%s is missing)", boxlayout.ExecutorRuntimeDir+"/current")
	}
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, boxlayout.ExecutorRuntimeDir, target, ".repository-digest"))
	if err != nil {
		return "", fmt.Errorf("active Executor release %s: %w", target, err)
	}
	if got := strings.TrimSpace(string(b)); !strings.HasSuffix(got, "@"+digest) {
		return "", fmt.Errorf("active Executor release is %s, the box runs %s", got, image)
	}
	return "active release " + target + " is " + image, nil
}

// credentials resolves a user in the root's passwd and group files.
func credentials(root, user string) (*syscall.Credential, error) {
	u, err := passwd.Lookup(root, user)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}, nil
}

// addToolHealth adds the tool checks (and the Executor's, when enabled) to
// the report: files only, or the commands too when deep.
func addToolHealth(ctx context.Context, e *env, r *health.Report, deep bool) {
	checks := toolChecks()
	if c, ok := executorCheck(e.root); ok {
		checks = append(checks, c)
	}
	o := toolcheck.ToolOptions{Root: e.root, Deep: deep, Creds: credentials, Now: r.Time}
	for code, c := range toolcheck.RunToolChecks(ctx, checks, o) {
		r.Checks[code] = c
	}
	r.Summarize()
}
