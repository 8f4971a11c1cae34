package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Cmd is one command the release validation runs.
type Cmd struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Credential, when set, runs the command as that user.
	Credential *syscall.Credential
}

// Runner runs commands; tests substitute a stand-in.
type Runner interface {
	Run(ctx context.Context, c Cmd) error
}

// ExecRunner runs commands as child processes with bounded output.
type ExecRunner struct{}

// Run starts c and waits for it; ctx ending kills it.
func (r ExecRunner) Run(ctx context.Context, c Cmd) error {
	_, err := r.Output(ctx, c)
	return err
}

// Output is Run that also returns the last 4 KiB of the command's stdout
// and stderr together.
func (ExecRunner) Output(ctx context.Context, c Cmd) (string, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.Credential}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", filepath.Base(c.Path), err, out.String())
	}
	return out.String(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// ValidateTimeout bounds the validation build.
const ValidateTimeout = 60 * time.Second

// validateRelease proves the release's import graph resolves: the
// release's own bun builds the layout's entry (the workspace's
// src/serve.ts, or the packaged dist-server/serve.js, whose external
// packages must resolve from app/node_modules) for the bun target into a
// private temp dir, with an isolated home, caches and data dir, without
// running it, within ValidateTimeout.
func validateRelease(ctx context.Context, run Runner, runtimeRoot, release string, cred *syscall.Credential) error {
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
	ctx, cancel := context.WithTimeout(ctx, ValidateTimeout)
	defer cancel()
	out := filepath.Join(tmp, "build")
	c := Cmd{
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
	}
	if err := run.Run(ctx, c); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
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
