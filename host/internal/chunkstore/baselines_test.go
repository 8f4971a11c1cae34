package chunkstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// A baseline is a backup tool the box benchmark runs on the same tree:
// Debian's restic and borg, each on a local repository. Bytes are
// compared as the repository's growth on disk: restic 0.14's data_added
// is the size before compression (a first backup that grew its
// repository by 425 MB reported 948 MB), so dividing our compressed bytes
// by it flattered us.
type baseline interface {
	// backup backs dir up; it returns its seconds and the bytes the
	// repository grew by on disk.
	backup(ctx context.Context, dir string) (secs float64, added int64, err error)
	// restore writes the newest backup's files below target, returning
	// its seconds.
	restore(ctx context.Context, target string) (float64, error)
}

// baselines are the tools this machine has, by name, each with a new
// repository below work.
func baselines(b *testing.B, work string) map[string]baseline {
	out := map[string]baseline{}
	if _, err := exec.LookPath("restic"); err != nil {
		b.Logf("restic not installed: its figures are not measured")
	} else {
		out["restic"] = newRestic(b, filepath.Join(work, "restic"))
	}
	if _, err := exec.LookPath("borg"); err != nil {
		b.Logf("borg not installed: its figures are not measured")
	} else {
		out["borg"] = newBorg(b, filepath.Join(work, "borg"))
	}
	return out
}

// excluded is the box's cache, which no snapshot takes.
func excluded(dir string) string { return filepath.Join(dir, boxlayout.InRoot(boxlayout.CacheDir)) }

// resticRepo drives Debian's restic on a local repository.
type resticRepo struct {
	repo string
	env  []string
	// raw is the last backup's data_added (before compression), for
	// the record.
	raw float64
}

func newRestic(b *testing.B, repo string) *resticRepo {
	r := &resticRepo{repo: repo, env: append(os.Environ(), "RESTIC_PASSWORD=bench", "RESTIC_CACHE_DIR="+repo+"-cache")}
	if out, err := r.cmd(context.Background(), "init").CombinedOutput(); err != nil {
		b.Fatalf("restic init: %v: %s", err, out)
	}
	return r
}

func (r *resticRepo) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "restic", append([]string{"--repo", r.repo}, args...)...)
	cmd.Env = r.env
	return cmd
}

func (r *resticRepo) backup(ctx context.Context, dir string) (float64, int64, error) {
	before := dirSize(r.repo)
	cmd := r.cmd(ctx, "backup", "--json", "--exclude", excluded(dir), dir)
	var out []byte
	t, err := timed(func() (err error) { out, err = cmd.Output(); return err })
	if err != nil {
		return 0, 0, fmt.Errorf("restic backup: %w: %s", err, out)
	}
	r.raw = -1
	for _, line := range bytes.Split(out, []byte("\n")) {
		var msg struct {
			MessageType string  `json:"message_type"`
			DataAdded   float64 `json:"data_added"`
		}
		if json.Unmarshal(line, &msg) == nil && msg.MessageType == "summary" {
			r.raw = msg.DataAdded
		}
	}
	if r.raw < 0 {
		return 0, 0, fmt.Errorf("restic printed no summary")
	}
	return t, dirSize(r.repo) - before, nil
}

func (r *resticRepo) restore(ctx context.Context, target string) (float64, error) {
	return timed(func() error {
		if out, err := r.cmd(ctx, "restore", "latest", "--target", target).CombinedOutput(); err != nil {
			return fmt.Errorf("restic restore: %w: %s", err, out)
		}
		return nil
	})
}

// borgRepo drives Debian's borg on a local repository, unencrypted and
// with zstd at level 1 (the settings the issue measured with).
type borgRepo struct {
	repo string
	env  []string
	n    int
}

func newBorg(b *testing.B, repo string) *borgRepo {
	r := &borgRepo{repo: repo, env: append(os.Environ(), "BORG_BASE_DIR="+repo+"-base", "BORG_RELOCATED_REPO_ACCESS_IS_OK=yes",
		"BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes")}
	if out, err := r.cmd(context.Background(), "", "init", "-e", "none", repo).CombinedOutput(); err != nil {
		b.Fatalf("borg init: %v: %s", err, out)
	}
	return r
}

func (r *borgRepo) cmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "borg", args...)
	cmd.Env, cmd.Dir = r.env, dir
	return cmd
}

func (r *borgRepo) backup(ctx context.Context, dir string) (float64, int64, error) {
	before := dirSize(r.repo)
	r.n++
	// borg stores the paths it is given: relative to dir, as restic's
	// restore below a target and ours do.
	cmd := r.cmd(ctx, dir, "create", "--compression", "zstd,1", "--exclude", "sh:**/"+boxlayout.InRoot(boxlayout.CacheDir),
		fmt.Sprintf("%s::b%d", r.repo, r.n), ".")
	t, err := timed(func() error {
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("borg create: %w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return t, dirSize(r.repo) - before, nil
}

func (r *borgRepo) restore(ctx context.Context, target string) (float64, error) {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return 0, err
	}
	return timed(func() error {
		if out, err := r.cmd(ctx, target, "extract", fmt.Sprintf("%s::b%d", r.repo, r.n)).CombinedOutput(); err != nil {
			return fmt.Errorf("borg extract: %w: %s", err, out)
		}
		return nil
	})
}
