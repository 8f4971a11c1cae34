//go:build oci

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/executor"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermescfg"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func init() { register(executorVerb) }

var executorVerb = verb{
	name: "executor",
	summary: "Executor image: pull [--image REF] [--activate] | activate [--image REF] | status [--sizes] | " +
		"connect-hermes (API key on stdin) | refresh-discovery | run (the supervisor's program)",
	relay: true,
	run:   runExecutor,
}

func runExecutor(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("executor: want a subcommand: pull, activate, status, connect-hermes, refresh-discovery or run")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "pull", "activate":
		return executorInstall(ctx, e, sub, rest)
	case "status":
		return executorStatus(ctx, e, rest)
	case "connect-hermes":
		return executorConnectHermes(ctx, e, rest)
	case "refresh-discovery":
		return executorRefreshDiscovery(ctx, e, rest)
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
	s, err := executor.NewStore(e.root, executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.events})
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

// executorRun is the supervisor's `executor` program (executor.Run).
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
	ref, hostPort, err := executor.RunInputs(os.Getenv)
	if err != nil {
		return usageError("executor run: %w", err)
	}
	o := executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.events}
	if err := executor.Run(ctx, e.root, ref, hostPort, o, e.log); err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	return nil
}

func executorStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor status", "[--sizes]")
	sizes := fs.Bool("sizes", false, "add the disk use of the runtime and data directories")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	res, err := executor.Status(ctx, e.root, *sizes)
	if err != nil {
		return fmt.Errorf("executor status: %w", err)
	}
	return writeJSON(e.Out, res)
}

// executorHealthURL is Executor's health endpoint inside the box.
var executorHealthURL = "http://127.0.0.1:" + strconv.Itoa(boot.ExecutorGuestPort) + "/api/health"

// executorConnectHermes reads the API key from stdin (never argv) and
// hands it to executor.Connector.
func executorConnectHermes(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor connect-hermes", "[--mcp-url URL] (API key on stdin)")
	mcpURL := fs.String("mcp-url", hermescfg.ExecutorURL, "Executor's MCP endpoint as Hermes reaches it (loopback http only)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := executor.CheckMCPURL(*mcpURL); err != nil {
		return usageError("executor connect-hermes: --mcp-url: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(e.In, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("executor connect-hermes: reading the API key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if err := hermescfg.ValidateSecret(key); err != nil {
		return usageError("executor connect-hermes: stdin: %w", err)
	}
	c := &executor.Connector{Root: e.root, URL: *mcpURL, HTTP: &http.Client{Timeout: 30 * time.Second}}
	res, err := c.Connect(ctx, key)
	if errors.Is(err, executor.ErrGatewayNotRunning) {
		_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
			Message: "Hermes is configured, but no supervisor is running to restart its gateway: it loads the executor MCP server when it next starts"})
		err = nil
	}
	if err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	return writeJSON(e.Out, res)
}

// executorRefreshDiscovery restarts the Hermes gateway once per boot after
// Executor turned healthy (executor.Refresher).
func executorRefreshDiscovery(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor refresh-discovery", "")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	r := &executor.Refresher{Root: e.root, HealthURL: executorHealthURL, HTTP: &http.Client{Timeout: 5 * time.Second}}
	res, err := r.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("executor refresh-discovery: %w", err)
	}
	return writeJSON(e.Out, res)
}
