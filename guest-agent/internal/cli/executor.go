//go:build oci

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermescfg"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

var executorVerb = verb{
	name:    "executor",
	summary: "Executor image: pull [--image REF] [--activate] | activate [--image REF] | status [--sizes] | connect-hermes | run (the supervisor's program)",
	run:     runExecutor,
}

// gatewayProgram is the Hermes gateway's name in the supervisor's table.
const gatewayProgram = "hermes"

// restartGateway restarts the Hermes gateway through the running boot's
// control socket, so it loads a changed configuration. Without a running
// boot it returns an error wrapping control.ErrNotRunning.
func restartGateway(ctx context.Context, root string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := control.Call(ctx, control.Socket(root), control.Request{Op: control.OpRestart, Name: gatewayProgram})
	return err
}

// executorPaths are the box paths the executor verb works on, under --root.
type executorPaths struct {
	runtime, data, hermesHome string
}

func executorPathsFor(root string) executorPaths {
	return executorPaths{
		runtime:    filepath.Join(root, oci.DefaultRuntimeRoot),
		data:       filepath.Join(root, oci.DefaultDataDir),
		hermesHome: filepath.Join(root, boot.HermesHome),
	}
}

func runExecutor(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("executor: want a subcommand: pull, activate, status, connect-hermes or run")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "pull", "activate":
		return executorInstall(ctx, e, sub, rest)
	case "status":
		return executorStatus(ctx, e, rest)
	case "connect-hermes":
		return executorConnectHermes(ctx, e, rest)
	case "run":
		return executorRun(ctx, e, rest)
	}
	return usageError("executor: unknown subcommand %q", sub)
}

func executorInstall(ctx context.Context, e *env, sub string, args []string) error {
	fs := newFlags(e, "executor "+sub, "[--image NAME:TAG@sha256:DIGEST]")
	image := fs.String("image", pins.DefaultExecutorImage, "image reference, pinned by tag and digest")
	activate := fs.Bool("activate", false, "pull: activate the release afterwards")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "pull: stop after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	ref, err := oci.ParseReference(*image)
	if err != nil {
		return usageError("executor %s: --image: %w", sub, err)
	}
	s, err := executorStore(e, *stall, *certDir)
	if err != nil {
		return fmt.Errorf("executor %s: %w", sub, err)
	}
	var r *oci.Release
	switch {
	case sub == "activate":
		r, err = s.Activate(ctx, ref)
	case *activate:
		r, err = s.Install(ctx, ref)
	default:
		r, err = s.Pull(ctx, ref)
	}
	if err != nil {
		return fmt.Errorf("executor %s: %w", sub, err)
	}
	return writeJSON(e.Out, r)
}

// executorStore is the release store of the box under e.root, pulling for
// this machine's architecture.
func executorStore(e *env, stall time.Duration, certDir string) (*oci.Store, error) {
	root := executorPathsFor(e.root).runtime
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &oci.Store{
		Root: root,
		PullOptions: oci.PullOptions{
			Platform:     oci.Platform{OS: "linux", Architecture: runtime.GOARCH},
			StallTimeout: stall,
			CertDir:      certDir,
			Events:       e.events,
		},
		UID: -1, GID: -1,
		RunAs: runtimeCredential(e.root),
	}, nil
}

// runtimeCredential is the user the validation build runs as: the runtime
// user when the agent is root in the real box, else the agent itself.
func runtimeCredential(root string) *syscall.Credential {
	if root != "/" || os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(oci.RuntimeUser)
	if err != nil {
		return nil
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// executorRun is the supervisor's `executor` program. Under the launcher
// lock it makes sure the configured image is pulled, verified and active
// (the active release is kept as is when it already holds the image: no
// network), creates the data dir, then replaces itself with bun running
// oci.Program, as that program's user, in its directory and with its
// environment plus HOME and PATH. Any failure exits non-zero, so the
// supervisor's backoff applies and health shows it.
func executorRun(ctx context.Context, e *env, args []string) error {
	if e.relayed {
		return usageError("executor run is the supervisor's program and does not run through the relay")
	}
	fs := newFlags(e, "executor run", "(image and host port from $"+boot.EnvExecutorImage+" and $"+boot.EnvExecutorHostPort+")")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "stop a pull after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	ref, hostPort, err := executorRunInputs(os.Getenv)
	if err != nil {
		return usageError("executor run: %w", err)
	}
	s, err := executorStore(e, *stall, *certDir)
	if err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	if _, err := s.EnsureActive(ctx, ref); err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	p := executorPathsFor(e.root)
	spec, err := oci.Program(p.runtime, p.data, hostPort)
	if err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	u, err := passwd.Lookup(e.root, spec.User)
	if err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	if err := ensureDataDir(p.data, u); err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	env := append([]string{"HOME=" + u.Home, "PATH=/usr/local/bin:/usr/bin:/bin"}, spec.Env...)
	e.log.Info("executor run: starting Executor", "image", ref.String(), "command", spec.Command[0], "user", spec.User)
	if err := execProgram(spec.Command, spec.Dir, env, u); err != nil {
		return fmt.Errorf("executor run: starting %s: %w", spec.Command[0], err)
	}
	return nil
}

// executorRunInputs reads the image and the host port that boot passes in
// the program's environment.
func executorRunInputs(getenv func(string) string) (oci.Reference, int, error) {
	image := getenv(boot.EnvExecutorImage)
	if image == "" {
		return oci.Reference{}, 0, fmt.Errorf("$%s is not set", boot.EnvExecutorImage)
	}
	ref, err := oci.ParseReference(image)
	if err != nil {
		return oci.Reference{}, 0, fmt.Errorf("$%s: %w", boot.EnvExecutorImage, err)
	}
	port, err := strconv.Atoi(getenv(boot.EnvExecutorHostPort))
	if err != nil || port < 1 || port > 65535 {
		return oci.Reference{}, 0, fmt.Errorf("$%s: want a port 1-65535, got %q", boot.EnvExecutorHostPort, getenv(boot.EnvExecutorHostPort))
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

// execProgram replaces the agent with argv, in dir, with exactly env, as u
// when the agent is root. Tests replace it.
var execProgram = func(argv []string, dir string, env []string, u passwd.User) error {
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

// ExecutorStatus is the JSON result of `executor status`.
type executorStatusResult struct {
	Current      *oci.Release  `json:"current"`
	Releases     []oci.Release `json:"releases"`
	RuntimeBytes *int64        `json:"runtimeBytes,omitempty"`
	DataBytes    *int64        `json:"dataBytes,omitempty"`
}

func executorStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor status", "[--sizes]")
	sizes := fs.Bool("sizes", false, "add the disk use of the runtime and data directories")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	p := executorPathsFor(e.root)
	s := &oci.Store{Root: p.runtime}
	var res executorStatusResult
	var err error
	if res.Current, err = s.Current(); err != nil {
		return fmt.Errorf("executor status: %w", err)
	}
	if res.Releases, err = s.Releases(); err != nil {
		return fmt.Errorf("executor status: %w", err)
	}
	if *sizes {
		sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		for _, d := range []struct {
			dir string
			dst **int64
		}{{p.runtime, &res.RuntimeBytes}, {p.data, &res.DataBytes}} {
			n, err := diskUse(sctx, d.dir)
			if err != nil {
				return fmt.Errorf("executor status: %w", err)
			}
			*d.dst = &n
		}
	}
	return writeJSON(e.Out, res)
}

// diskUse sums the allocated size of the files under dir (0 if missing).
func diskUse(ctx context.Context, dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return n, nil
}

// executorConnectHermes reads the API key from stdin (never argv), stores it
// in Hermes' .env and points mcp_servers.executor at it, then restarts the
// gateway.
func executorConnectHermes(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor connect-hermes", "(API key on stdin)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(e.In, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("executor connect-hermes: reading the API key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if err := hermescfg.ValidateSecret(key); err != nil {
		return usageError("executor connect-hermes: stdin: %w", err)
	}
	home := executorPathsFor(e.root).hermesHome
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	if err := hermescfg.SetEnv(filepath.Join(home, ".env"), hermescfg.ExecutorKeyVar, key); err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	if err := hermescfg.SetMCPServer(filepath.Join(home, "config.yaml"), "executor", hermescfg.ExecutorServer()); err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	if err := chownToRuntimeUser(e.root, filepath.Join(home, ".env"), filepath.Join(home, "config.yaml")); err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	switch err := restartGateway(ctx, e.root); {
	case errors.Is(err, control.ErrNotRunning):
		_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
			Message: "Hermes is configured, but no supervisor is running to restart its gateway: it loads the executor MCP server when it next starts"})
	case err != nil:
		return fmt.Errorf("executor connect-hermes: restarting the Hermes gateway: %w", err)
	}
	return writeJSON(e.Out, map[string]string{"mcpServer": "executor", "url": hermescfg.ExecutorURL})
}

// chownToRuntimeUser hands files to the runtime user in the real box.
func chownToRuntimeUser(root string, paths ...string) error {
	cred := runtimeCredential(root)
	if cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}
