package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
)

// ExecRunner runs the release validation (bun, through the agent's one
// command runner and its environment policy: a fixed base plus the entries
// named here) as a child process in its own process group, killed 5 s
// after SIGTERM at the deadline. Tests substitute a stand-in Runner.
var ExecRunner = command.ExecRunner{KillAfter: 5 * time.Second}

// ValidateTimeout bounds the validation build.
const ValidateTimeout = 60 * time.Second

// validateRelease proves the release's import graph resolves: the
// release's own bun builds the layout's entry (the workspace's
// src/serve.ts, or the packaged dist-server/serve.js, whose external
// packages must resolve from app/node_modules) for the bun target into a
// private temp dir, with an isolated home, caches and data dir, without
// running it, within ValidateTimeout.
func validateRelease(ctx context.Context, run command.Runner, runtimeRoot, release string, cred *syscall.Credential) error {
	layout, err := checkPayload(release)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(runtimeRoot, ".validation-")
	if err != nil {
		return fmt.Errorf("creating validation dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if cred != nil {
		if err := os.Chown(tmp, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("handing %s to the runtime user: %w", tmp, err)
		}
	}
	out := filepath.Join(tmp, "build")
	c := command.Command{
		Path: filepath.Join(release, bunPath),
		Args: []string{"build", filepath.Join(release, selfhostDir, layout.Entry()), "--target=bun", "--outdir=" + out},
		Dir:  tmp,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + tmp, "TMPDIR=" + tmp,
			"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"),
			"XDG_DATA_HOME=" + filepath.Join(tmp, "data"),
			"XDG_CACHE_HOME=" + filepath.Join(tmp, "cache"),
			"EXECUTOR_DATA_DIR=" + filepath.Join(tmp, "executor-data"),
			"BUN_FEATURE_FLAG_DISABLE_IPV6=1",
		},
		Credential: cred,
		Timeout:    ValidateTimeout,
	}
	if _, err := run.Run(ctx, c); err != nil {
		if ce := (*command.CommandError)(nil); errors.As(err, &ce) && ce.TimedOut {
			return fmt.Errorf("validating release %s (%s layout): bun build did not finish within %s", release, layout, ValidateTimeout)
		}
		return fmt.Errorf("validating release %s (%s layout): %w", release, layout, err)
	}
	fi, err := os.Stat(filepath.Join(out, "serve.js"))
	if err != nil || fi.Size() == 0 {
		return fmt.Errorf("validating release %s (%s layout): bun build wrote no %s", release, layout, filepath.Join("build", "serve.js"))
	}
	return nil
}
