package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/executor/hermeslink"
	"github.com/hermes-box/hermes-box/guest-agent/internal/hermesconfig"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The executor subcommands that link Hermes to Executor. They need none
// of the image code, so the lean agent runs them itself (executorHermesSubs)
// instead of handing them to its Executor helper.
var executorHermesSubs = map[string]func(context.Context, *env, []string) error{
	"connect-hermes":    executorConnectHermes,
	"refresh-discovery": executorRefreshDiscovery,
}

// executorHealthURL is Executor's health endpoint inside the box.
var executorHealthURL = "http://127.0.0.1:" + strconv.Itoa(boxlayout.ExecutorPort) + "/api/health"

// executorConnectHermes reads the API key from stdin (never argv) and
// hands it to hermeslink.Connector.
func executorConnectHermes(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor connect-hermes", "[--mcp-url URL] (API key on stdin)")
	mcpURL := fs.String("mcp-url", boxlayout.ExecutorURL, "Executor's MCP endpoint as Hermes reaches it (loopback http only)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := hermeslink.CheckMCPURL(*mcpURL); err != nil {
		return usageError("executor connect-hermes: --mcp-url: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(e.In, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("executor connect-hermes: reading the API key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if err := hermesconfig.ValidateSecret(key); err != nil {
		return usageError("executor connect-hermes: stdin: %w", err)
	}
	c := &hermeslink.Connector{Root: e.root, URL: *mcpURL, HTTP: &http.Client{Timeout: 30 * time.Second}}
	res, err := c.Connect(ctx, key)
	if errors.Is(err, hermeslink.ErrGatewayNotRunning) {
		_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
			Message: "Hermes is configured, but no supervisor is running to restart its gateway: it loads the executor MCP server when it next starts"})
		err = nil
	}
	if err != nil {
		return fmt.Errorf("executor connect-hermes: %w", err)
	}
	// Hermes' config.yaml and .env changed: ask Hermes for the gate's
	// verdict now, within this verb's deadline, so that the next health
	// check finds it kept instead of asking within health's 30 s (minutes
	// on a slow or emulated machine). A gate found changed is said here,
	// and health says it again.
	if c, _ := gateHealth(ctx, e); c.Status != health.StatusHealthy && c.Severity == health.SeverityCritical {
		_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn, Message: c.Message})
	}
	return writeJSON(e.Out, res)
}

// executorRefreshDiscovery restarts the Hermes gateway once per boot after
// Executor turned healthy (hermeslink.Refresher).
func executorRefreshDiscovery(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor refresh-discovery", "")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	r := &hermeslink.Refresher{Root: e.root, HealthURL: executorHealthURL, HTTP: &http.Client{Timeout: 5 * time.Second}}
	res, err := r.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("executor refresh-discovery: %w", err)
	}
	return writeJSON(e.Out, res)
}
