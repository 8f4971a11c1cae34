package cli

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermescfg"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func init() { register(executorVerb) }

var executorVerb = verb{
	name:    "executor",
	summary: "Executor image: pull [--image REF] [--activate] | activate [--image REF] | status [--sizes] | logs [-n N] [-f] | connect-hermes",
	relay:   true,
	run:     runExecutor,
}

// restartGateway restarts the Hermes gateway after connect-hermes; the
// supervisor sets it. Until then connect-hermes says the restart is due.
var restartGateway func(ctx context.Context) error

// executorPaths are the box paths the executor verb works on, under --root.
type executorPaths struct {
	runtime, data, log, hermesHome string
}

func executorPathsFor(root string) executorPaths {
	return executorPaths{
		runtime:    filepath.Join(root, oci.DefaultRuntimeRoot),
		data:       filepath.Join(root, oci.DefaultDataDir),
		log:        filepath.Join(root, "workspace/executor/executor.log"),
		hermesHome: filepath.Join(root, "workspace/hermes-home"),
	}
}

func runExecutor(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("executor: want a subcommand: pull, activate, status, logs or connect-hermes")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "pull", "activate":
		return executorInstall(ctx, e, sub, rest)
	case "status":
		return executorStatus(ctx, e, rest)
	case "logs":
		return executorLogs(ctx, e, rest)
	case "connect-hermes":
		return executorConnectHermes(ctx, e, rest)
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
	p := executorPathsFor(e.root)
	s := &oci.Store{
		Root: p.runtime,
		PullOptions: oci.PullOptions{
			Platform:     oci.Platform{OS: "linux", Architecture: runtime.GOARCH},
			StallTimeout: *stall,
			CertDir:      *certDir,
			Events:       e.events,
		},
		UID: -1, GID: -1,
		RunAs: runtimeCredential(e.root),
	}
	if err := os.MkdirAll(p.runtime, 0o755); err != nil {
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

func executorLogs(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor logs", "[-n LINES] [-f]")
	lines := fs.Int("n", 100, "show the last LINES lines")
	follow := fs.Bool("f", false, "keep printing new lines until stopped")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *lines < 0 {
		return usageError("executor logs: -n must not be negative")
	}
	path := executorPathsFor(e.root).log
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("executor logs: %w", err)
	}
	defer f.Close()
	if err := tailLines(f, e.Out, *lines); err != nil {
		return fmt.Errorf("executor logs: %s: %w", path, err)
	}
	if !*follow {
		return nil
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := io.Copy(e.Out, f); err != nil {
			return fmt.Errorf("executor logs: %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tailLines writes the last n lines of f and leaves f at its end.
func tailLines(f *os.File, w io.Writer, n int) error {
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > n {
			ring = ring[1:]
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(ring) > 0 {
		if _, err := io.WriteString(w, strings.Join(ring, "\n")+"\n"); err != nil {
			return err
		}
	}
	_, err := f.Seek(0, io.SeekEnd)
	return err
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
	if restartGateway == nil {
		_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
			Message: "restart the Hermes gateway to load the executor MCP server (no supervisor in this agent)"})
	} else if err := restartGateway(ctx); err != nil {
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

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}
