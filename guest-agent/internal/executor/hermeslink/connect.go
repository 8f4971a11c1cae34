// Package hermeslink connects Hermes to Executor inside the box: the MCP
// surface checked at the address Hermes uses, the key and the server entry
// written into Hermes' home, `hermes mcp test executor` run as the hermes
// user with the files put back when it fails, and the one gateway restart
// per boot that makes Hermes discover Executor's tools. It links none of
// the image code, so the lean agent runs it itself.
package hermeslink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/mcp"
)

// GatewayProgram is the Hermes gateway's name in the supervisor's table.
const GatewayProgram = "hermes"

// Timeouts of connect-hermes' steps.
const (
	surfaceTimeout = 30 * time.Second
	mcpTestTimeout = 2 * time.Minute
	restartTimeout = 2 * time.Minute
)

// Connector connects Hermes to Executor inside the box under Root.
type Connector struct {
	Root string
	// URL is Executor's MCP endpoint at the address Hermes uses
	// (boxlayout.ExecutorURL in the box).
	URL  string
	HTTP *http.Client
	// Runner runs `hermes mcp test executor`; nil means provision.ExecRunner.
	Runner command.Runner
	// Restart restarts the Hermes gateway; nil means RestartGateway.
	Restart func(ctx context.Context) error
}

// CheckMCPURL accepts only an http URL on the box's loopback (127.0.0.1,
// ::1 or localhost) with a port and the path /mcp: the endpoint Hermes is
// pointed at never leaves the box.
func CheckMCPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if u.Scheme != "http" || u.Port() == "" || u.Path != "/mcp" || u.RawQuery != "" || u.User != nil ||
		(host != "127.0.0.1" && host != "::1" && host != "localhost") {
		return fmt.Errorf("%q is not http://127.0.0.1:PORT/mcp (or [::1], localhost)", s)
	}
	return nil
}

// Connected is connect-hermes' JSON result.
type Connected struct {
	MCPServer string   `json:"mcpServer"`
	URL       string   `json:"url"`
	Tools     []string `json:"tools"`
	// GatewayRestarted is false when no supervisor ran to restart it.
	GatewayRestarted bool `json:"gatewayRestarted"`
}

// ErrGatewayNotRunning wraps the connected result's caveat: Hermes is
// configured but its gateway loads Executor only when it next starts.
var ErrGatewayNotRunning = control.ErrNotRunning

// Connect checks Executor's MCP surface with key at c.URL, from inside the
// box as Hermes will reach it (exactly execute and resume); stores key in
// Hermes' .env and points mcp_servers.executor at c.URL; runs `hermes mcp
// test executor` as the hermes user, and puts both files back as they were
// if that fails; then restarts the gateway so it loads the server. The key
// never appears in an error.
func (c *Connector) Connect(ctx context.Context, key string) (Connected, error) {
	res := Connected{MCPServer: "executor", URL: c.URL, Tools: mcp.ExecutorTools}
	if err := hermesconfig.ValidateSecret(key); err != nil {
		return res, err
	}
	sctx, cancel := context.WithTimeout(ctx, surfaceTimeout)
	err := mcp.New(c.URL, key, c.HTTP).CheckExecutorSurface(sctx)
	cancel()
	if err != nil {
		return res, fmt.Errorf("checking Executor's MCP surface at %s (the address Hermes uses): %w", c.URL, err)
	}
	home := filepath.Join(c.Root, boxlayout.HermesHome)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return res, err
	}
	files := []string{filepath.Join(home, ".env"), filepath.Join(home, "config.yaml")}
	saved, err := saveFiles(files...)
	if err != nil {
		return res, err
	}
	if err := c.configure(ctx, key, files); err != nil {
		if rerr := saved.restore(); rerr != nil {
			return res, errors.Join(err, fmt.Errorf("putting Hermes' configuration back: %w", rerr))
		}
		return res, fmt.Errorf("%w; Hermes' configuration is as it was", err)
	}
	switch err := c.restart(ctx); {
	case errors.Is(err, control.ErrNotRunning):
		return res, fmt.Errorf("%w: %w", ErrGatewayNotRunning, err)
	case err != nil:
		return res, fmt.Errorf("restarting the Hermes gateway: %w", err)
	}
	res.GatewayRestarted = true
	return res, nil
}

// configure writes the key and the server entry, then proves them with
// Hermes' own `mcp test`.
func (c *Connector) configure(ctx context.Context, key string, files []string) error {
	env, cfg := files[0], files[1]
	if err := hermesconfig.SetEnv(env, hermesconfig.ExecutorKeyVar, key); err != nil {
		return err
	}
	if err := hermesconfig.SetMCPServer(cfg, "executor", hermesconfig.ExecutorServerAt(c.URL)); err != nil {
		return err
	}
	if err := chownToServiceUser(c.Root, env, cfg); err != nil {
		return err
	}
	return c.mcpTest(ctx, key)
}

// mcpTest runs `hermes mcp test executor` as the hermes user with Hermes'
// home, and reads its output: the command exits 0 even when it fails.
func (c *Connector) mcpTest(ctx context.Context, key string) error {
	u, err := passwd.Lookup(c.Root, boxlayout.ServiceUser)
	if err != nil {
		return err
	}
	run := c.Runner
	if run == nil {
		run = command.ExecRunner{KillAfter: 5 * time.Second}
	}
	out, err := run.Run(ctx, c.mcpTestCommand(u))
	text := redact(string(out.Stdout)+string(out.Stderr), key)
	if err != nil {
		return fmt.Errorf("hermes mcp test executor (as %s) failed: %s", u.Name, strings.TrimSpace(redact(err.Error(), key)))
	}
	if err := mcpTestPassed(text); err != nil {
		return fmt.Errorf("hermes mcp test executor (as %s): %w; its output:\n%s", u.Name, err, strings.TrimSpace(text))
	}
	return nil
}

// mcpTestCommand is `hermes mcp test executor` with Hermes' environment:
// through runuser as the hermes user in the real box (the agent is root
// there), directly under a test root.
func (c *Connector) mcpTestCommand(u passwd.User) command.Command {
	home := filepath.Join(c.Root, boxlayout.HermesHome)
	env := []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name, "HERMES_HOME=" + home, "NO_COLOR=1"}
	argv := []string{filepath.Join(c.Root, boxlayout.HermesCLI), "mcp", "test", "executor"}
	if c.Root == "/" && os.Geteuid() == 0 {
		return command.Command{Path: "runuser", Args: append(append([]string{"-u", u.Name, "--", "env"}, env...), argv...),
			Dir: home, Timeout: mcpTestTimeout}
	}
	return command.Command{Path: argv[0], Args: argv[1:], Env: env, Dir: home, Timeout: mcpTestTimeout}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// mcpTestPassed reads `hermes mcp test`'s report: it must have connected
// and listed both of Executor's tools.
func mcpTestPassed(out string) error {
	out = ansi.ReplaceAllString(out, "")
	switch {
	case strings.Contains(out, "not found in config"):
		return errors.New("the executor server is missing from Hermes' configuration")
	case strings.Contains(out, "Connection failed"), !strings.Contains(out, "Connected"):
		return errors.New("no connection to Executor")
	case !strings.Contains(out, "Tools discovered:"):
		return errors.New("no tools listed")
	}
	words := map[string]bool{}
	for _, f := range strings.FieldsFunc(out, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == ':' }) {
		words[f] = true
	}
	for _, t := range mcp.ExecutorTools {
		if !words[t] {
			return fmt.Errorf("executor's %q tool was not discovered", t)
		}
	}
	return nil
}

// redact removes the key and any masked header line from s.
func redact(s, key string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "Authorization") || strings.Contains(line, "***") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.ReplaceAll(strings.Join(keep, "\n"), key, "[redacted]")
}

// chownToServiceUser hands files to the hermes user in the real box.
func chownToServiceUser(root string, paths ...string) error {
	if root != "/" || os.Geteuid() != 0 {
		return nil
	}
	u, err := passwd.Lookup(root, boxlayout.ServiceUser)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := os.Chown(p, int(u.UID), int(u.GID)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Connector) restart(ctx context.Context) error {
	if c.Restart != nil {
		return c.Restart(ctx)
	}
	return RestartGateway(ctx, c.Root)
}

// RestartGateway restarts the Hermes gateway through the running boot's
// control socket, so it loads a changed configuration. Without a running
// boot it returns an error wrapping control.ErrNotRunning.
func RestartGateway(ctx context.Context, root string) error {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	_, err := control.Call(ctx, control.Socket(root), control.Request{Op: control.OpRestart, Name: GatewayProgram})
	return err
}

// savedFile is a file's content and ownership before connect-hermes.
type savedFile struct {
	path   string
	exists bool
	data   []byte
	info   fs.FileInfo
}

type savedFiles []savedFile

// saveFiles reads each file (a missing one is recorded as missing).
func saveFiles(paths ...string) (savedFiles, error) {
	var out savedFiles
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			out = append(out, savedFile{path: p})
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, savedFile{path: p, exists: true, data: b, info: fi})
	}
	return out, nil
}

// restore puts every file back: the same bytes, mode and owner, written
// atomically, or removed when it did not exist.
func (s savedFiles) restore() error {
	var errs []error
	for _, f := range s {
		if !f.exists {
			if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, atomicfile.WriteLike(f.path, f.data, f.info, 0o600))
	}
	return errors.Join(errs...)
}
