package executor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Run is the supervisor's `executor` program. Under the launcher lock it
// makes sure ref is pulled, verified and active (the active release is
// kept as is when it already holds the image: no network), creates the
// data dir, then replaces itself with the release's own bun running the
// layout's entry (Program), as that program's user, in its directory
// and with its environment plus HOME and PATH. Any failure returns, so the
// supervisor's backoff applies and health shows it.
func Run(ctx context.Context, root string, ref oci.Reference, hostPort int, o StoreOptions, log *slog.Logger) error {
	s, err := NewStore(root, o)
	if err != nil {
		return err
	}
	if _, err := s.EnsureActive(ctx, ref); err != nil {
		return err
	}
	p := PathsFor(root)
	spec, err := Program(p, hostPort)
	if err != nil {
		return err
	}
	u, err := passwd.Lookup(root, spec.User)
	if err != nil {
		return err
	}
	if err := ensureDataDir(p.Data, u); err != nil {
		return err
	}
	env := append([]string{"HOME=" + u.Home, "PATH=/usr/local/bin:/usr/bin:/bin"}, spec.Env...)
	log.Info("executor run: starting Executor", "image", ref.String(), "command", spec.Command[0], "entry", spec.Command[len(spec.Command)-1], "user", spec.User)
	if err := Exec(spec.Command, spec.Dir, env, u); err != nil {
		return fmt.Errorf("starting %s: %w", spec.Command[0], err)
	}
	return nil
}

// RunInputs reads the image and the host port that boot passes in the
// program's environment.
func RunInputs(getenv func(string) string) (oci.Reference, int, error) {
	image := getenv(boxlayout.EnvExecutorImage)
	if image == "" {
		return oci.Reference{}, 0, fmt.Errorf("$%s is not set", boxlayout.EnvExecutorImage)
	}
	ref, err := oci.ParseReference(image)
	if err != nil {
		return oci.Reference{}, 0, fmt.Errorf("$%s: %w", boxlayout.EnvExecutorImage, err)
	}
	port, err := strconv.Atoi(getenv(boxlayout.EnvExecutorHostPort))
	if err != nil || port < 1 || port > 65535 {
		return oci.Reference{}, 0, fmt.Errorf("$%s: want a port 1-65535, got %q", boxlayout.EnvExecutorHostPort, getenv(boxlayout.EnvExecutorHostPort))
	}
	return ref, port, nil
}

// ensureDataDir creates Executor's data dir if missing, owned by its user
// when the agent is root; an existing one is left as it is.
func ensureDataDir(dir string, u passwd.User) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(dir, int(u.UID), int(u.GID))
}

// Exec replaces the agent with argv, in dir, with exactly env, as u when
// the agent is root. Tests replace it.
var Exec = func(argv []string, dir string, env []string, u passwd.User) error {
	if err := os.Chdir(dir); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		groups := make([]int, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("setting the groups of %s: %w", u.Name, err)
		}
		if err := syscall.Setgid(int(u.GID)); err != nil {
			return fmt.Errorf("switching to the group of %s: %w", u.Name, err)
		}
		if err := syscall.Setuid(int(u.UID)); err != nil {
			return fmt.Errorf("switching to %s: %w", u.Name, err)
		}
	}
	return syscall.Exec(argv[0], argv, env)
}
