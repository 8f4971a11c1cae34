// Package toolcheck checks what provisioning (and the first boot)
// installed: files in every health report, and with Deep the tools
// themselves run (hermes --version, node --version, …). It runs commands, so
// only the health verb uses it, never the boot process.
package toolcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

// ToolCheck is one named check that what provisioning installed works.
// Its cheap half (Files: each must exist, one of each group of
// alternatives separated by "|") runs in every report; its deep half
// (Commands: each must exit 0) only when asked for, as `init` does before
// it calls the box ready.
type ToolCheck struct {
	Code     health.Code
	Severity health.Severity
	Files    []string
	Commands [][]string
	// User runs the commands (its uid, gid and groups); "" is root.
	User string
	Env  []string
	// Cheap, when set, is one more file-level check (no process).
	Cheap func(root string) (string, error)
}

// Credentials resolves a user under root for a command.
type Credentials func(root, user string) (*syscall.Credential, error)

// ToolOptions is how RunToolChecks runs.
type ToolOptions struct {
	Root string
	Deep bool
	// Creds resolves ToolCheck.User; required when a check names one.
	Creds Credentials
	// Timeout bounds each command; 60 s by default.
	Timeout time.Duration
	Now     time.Time
}

// RunToolChecks runs the checks concurrently.
func RunToolChecks(ctx context.Context, checks []ToolCheck, o ToolOptions) map[health.Code]health.Check {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	out := make(map[health.Code]health.Check, len(checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tc := range checks {
		wg.Go(func() {
			c := health.Check{Status: health.StatusHealthy, Severity: tc.Severity, Since: o.Now}
			if c.Severity == "" {
				c.Severity = health.SeverityCritical
			}
			msg, err := runTool(ctx, tc, o)
			c.Message = msg
			if err != nil {
				c.Status, c.Message = health.StatusUnhealthy, err.Error()
				if c.Severity == health.SeverityWarning {
					c.Status = health.StatusDegraded
				}
			}
			mu.Lock()
			out[tc.Code] = c
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func runTool(ctx context.Context, tc ToolCheck, o ToolOptions) (string, error) {
	var found []string
	for _, alts := range tc.Files {
		p, err := firstExisting(o.Root, strings.Split(alts, "|"))
		if err != nil {
			return "", err
		}
		found = append(found, p)
	}
	msg := "present: " + strings.Join(found, ", ")
	if tc.Cheap != nil {
		m, err := tc.Cheap(o.Root)
		if err != nil {
			return "", err
		}
		msg = strings.TrimPrefix(msg+"; "+m, "present: ; ")
	}
	if !o.Deep || len(tc.Commands) == 0 {
		return msg, nil
	}
	var outs []string
	for _, argv := range tc.Commands {
		out, err := runCommand(ctx, tc, o, argv)
		if err != nil {
			return "", err
		}
		outs = append(outs, out)
	}
	return strings.Join(outs, "; "), nil
}

func firstExisting(root string, alts []string) (string, error) {
	for _, a := range alts {
		if _, err := os.Stat(filepath.Join(root, a)); err == nil {
			return a, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s is missing", strings.Join(alts, " or "))
}

// maxOutput bounds what a command may print into a message.
const maxOutput = 200

// runCommand runs argv (its path under the root) and returns the first
// line of its output.
func runCommand(ctx context.Context, tc ToolCheck, o ToolOptions, argv []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	path := argv[0]
	if filepath.IsAbs(path) {
		path = filepath.Join(o.Root, path)
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Env = tc.Env
	cmd.WaitDelay = time.Second
	if tc.User != "" {
		if o.Creds == nil {
			return "", fmt.Errorf("%s: no way to run as %s", argv[0], tc.User)
		}
		cred, err := o.Creds(o.Root, tc.User)
		if err != nil {
			return "", err
		}
		// As the agent's own user (tests), no credential change is needed.
		if cred.Uid != uint32(os.Getuid()) || cred.Gid != uint32(os.Getgid()) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
	}
	out, err := cmd.CombinedOutput()
	first, _, _ := strings.Cut(strings.TrimSpace(string(bytes.ToValidUTF8(out, []byte("?")))), "\n")
	if len(first) > maxOutput {
		first = first[:maxOutput] + "…"
	}
	name := strings.Join(argv, " ")
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", name, err, first)
	}
	if first == "" {
		return name + ": ok", nil
	}
	return name + ": " + first, nil
}
