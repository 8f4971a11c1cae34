package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/browser"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/prompt"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// executorDeps are the boundaries of the executor commands; tests swap them.
type executorDeps struct {
	loadBox func(cmd *cobra.Command) (*box.Executor, error)
	openURL func(ctx context.Context, url string) error
	// readSecret reads the API key from a terminal without echo, or the
	// first line of any other stdin.
	readSecret func(in io.Reader, prompt io.Writer) (string, error)
}

func defaultExecutorDeps() executorDeps {
	return executorDeps{
		loadBox: func(cmd *cobra.Command) (*box.Executor, error) {
			b, err := loadBox(cmd)
			if err != nil {
				return nil, err
			}
			return box.ExecutorOf(b), nil
		},
		openURL:    browser.Open,
		readSecret: readAPIKey,
	}
}

// executorCmd carries the deps and the loaded box into each subcommand.
type executorCmd struct {
	deps executorDeps
	box  *box.Executor
}

func newExecutorCommand() *cobra.Command { return newExecutorCommandWith(defaultExecutorDeps()) }

func newExecutorCommandWith(deps executorDeps) *cobra.Command {
	x := &executorCmd{deps: deps}
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Manage Executor, the MCP gateway inside the box",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(x.openCmd(), x.statusCmd(), x.logsCmd(), x.authCmd(), x.connectionsCmd(), x.toolsCmd(), x.mcpTestCmd(), x.connectHermesCmd())
	return cmd
}

// load reads the box's configuration; needEnabled refuses a box without
// Executor.
func (x *executorCmd) load(cmd *cobra.Command, needEnabled bool) error {
	e, err := x.deps.loadBox(cmd)
	if err != nil {
		return err
	}
	if needEnabled && !e.Enabled {
		return box.ErrExecutorDisabled
	}
	if needEnabled && e.State != nil {
		if state, err := e.State(cmd.Context()); err == nil && state == "missing" {
			return userr.NotInitialised("machine " + e.Machine + " does not exist")
		}
	}
	x.box = e
	return nil
}

func (x *executorCmd) openCmd() *cobra.Command {
	return x.enabled(&cobra.Command{
		Use:   "open",
		Short: "Open the Executor portal in a browser",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command) error {
		if err := x.box.Health(cmd.Context()); err != nil {
			return fmt.Errorf("executor is not answering on %s (is the box running? `hermes-box start`): %w", x.box.PortalURL(), err)
		}
		fmt.Fprintln(cmd.OutOrStdout(), x.box.PortalURL())
		return x.deps.openURL(cmd.Context(), x.box.PortalURL())
	})
}

func (x *executorCmd) statusCmd() *cobra.Command {
	var asJSON, sizes bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show Executor's health, image and API key status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, false); err != nil {
				return err
			}
			v := x.box.Status(cmd.Context(), sizes)
			if err := cmd.Context().Err(); err != nil {
				return err // interrupted: the report's errors are the interruption's
			}
			if asJSON {
				return writeIndentedJSON(cmd.OutOrStdout(), v)
			}
			return printExecutorStatus(cmd.OutOrStdout(), v)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&sizes, "sizes", false, "add the disk use of the runtime and data directories")
	return cmd
}

func printExecutorStatus(w io.Writer, v box.ExecutorStatus) error {
	// Every string but the host's own came from the box.
	v.State, v.HealthError, v.MetadataError = termsafe.String(v.State), termsafe.String(v.HealthError), termsafe.String(v.MetadataError)
	v.Image, v.ImageDigest = termsafe.String(v.Image), termsafe.String(v.ImageDigest)
	auth := "not stored"
	if v.AuthStored {
		auth = "stored in the OS keyring"
	}
	fmt.Fprintf(w, "Enabled:    %t\nMachine:    %s (%s)\nPortal:     %s\nAPI key:    %s\n", v.Enabled, v.Machine, v.State, v.URL, auth)
	if !v.Enabled || v.State != box.StateRunning {
		if v.HealthError != "" {
			fmt.Fprintf(w, "Error:      %s\n", v.HealthError)
		}
		return nil
	}
	health := "ok"
	if !v.Healthy {
		health = "unhealthy: " + v.HealthError
	}
	fmt.Fprintf(w, "Health:     %s\n", health)
	if v.MetadataError != "" {
		fmt.Fprintf(w, "Metadata err: %s\n", v.MetadataError)
	}
	if v.Image != "" {
		fmt.Fprintf(w, "Image:      %s\nDigest:     %s\n", v.Image, v.ImageDigest)
	}
	if v.RuntimeBytes != nil && v.DataBytes != nil {
		fmt.Fprintf(w, "Disk:       runtime %s, data %s\n", progress.Bytes(*v.RuntimeBytes), progress.Bytes(*v.DataBytes))
	}
	return nil
}

func (x *executorCmd) logsCmd() *cobra.Command {
	var follow bool
	var lines int
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show or follow Executor's log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lines < 0 {
				return errors.New("invalid -n: must not be negative")
			}
			if err := x.load(cmd, true); err != nil {
				return err
			}
			return x.box.Agent.Logs(cmd.Context(), cmd.OutOrStdout(), "executor", lines, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().IntVarP(&lines, "lines", "n", protocol.DefaultLogLines, "number of lines to show")
	return cmd
}

// noSecretArgs refuses positional arguments without echoing them: they
// might be the key.
func noSecretArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments: the API key is read from a prompt or stdin, never from the command line", cmd.CommandPath())
	}
	return nil
}

func (x *executorCmd) authCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Manage this box's Executor API key in the OS keyring", Args: cobra.NoArgs}
	set := &cobra.Command{
		Use:   "set",
		Short: "Store the API key (read from a hidden prompt or from stdin)",
		Args:  noSecretArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, false); err != nil {
				return err
			}
			raw, err := x.deps.readSecret(cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("reading the API key: %w", err)
			}
			if err := x.box.StoreKey(raw); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Executor API key stored in the OS keyring for %s\n", x.box.Machine)
			return nil
		},
	}
	status := &cobra.Command{
		Use: "status", Short: "Say whether an API key is stored", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, false); err != nil {
				return err
			}
			state := "not stored"
			stored := x.box.KeyStored()
			if stored {
				state = "stored in the OS keyring"
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				return writeIndentedJSON(cmd.OutOrStdout(), struct {
					Machine string `json:"machine"`
					Stored  bool   `json:"stored"`
					Store   string `json:"store"`
				}{x.box.Machine, stored, "os-keyring"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Executor API key: %s\n", state)
			return nil
		},
	}
	status.Flags().Bool("json", false, "print the state as JSON (never the key)")
	clear := &cobra.Command{
		Use: "clear", Short: "Remove the stored API key", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, false); err != nil {
				return err
			}
			removed, err := x.box.ClearKey()
			if err != nil {
				return err
			}
			msg := "No Executor API key was stored"
			if removed {
				msg = "Executor API key removed"
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		},
	}
	cmd.AddCommand(set, status, clear)
	return cmd
}

func (x *executorCmd) connectionsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "connections",
		Short: "List Executor's configured connections",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return x.runExecute(cmd, "return await tools.executor.coreTools.connections.list({});", asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (x *executorCmd) toolsCmd() *cobra.Command {
	var asJSON bool
	var limit int
	var namespace string
	cmd := &cobra.Command{
		Use:   "tools [QUERY]",
		Short: "Search the tools Executor offers",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 100 {
				return fmt.Errorf("invalid --limit %d: want 1 to 100", limit)
			}
			q := map[string]any{"limit": limit}
			if len(args) == 1 {
				q["query"] = args[0]
			}
			if namespace != "" {
				q["namespace"] = namespace
			}
			b, err := json.Marshal(q) // JSON is a valid JavaScript literal: no injection
			if err != nil {
				return err
			}
			return x.runExecute(cmd, "return await tools.search("+string(b)+");", asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 20, "return at most this many tools (1-100)")
	cmd.Flags().StringVar(&namespace, "namespace", "", "search one integration namespace")
	return cmd
}

// runExecute runs code through the execute tool and prints the value.
func (x *executorCmd) runExecute(cmd *cobra.Command, code string, asJSON bool) error {
	if err := x.load(cmd, true); err != nil {
		return err
	}
	c, err := x.box.Client(cmd.Context())
	if err != nil {
		return err
	}
	out, err := c.Execute(cmd.Context(), code)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", termsafe.JSON(out))
		return err
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("decoding the execute result: %w", err)
	}
	return writeIndentedJSON(cmd.OutOrStdout(), v)
}

func (x *executorCmd) mcpTestCmd() *cobra.Command {
	return x.enabled(&cobra.Command{
		Use:   "mcp-test",
		Short: "Check the authenticated MCP surface (exactly execute and resume)",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command) error {
		if err := x.box.CheckSurface(cmd.Context()); err != nil {
			return err
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "Executor MCP OK: http://localhost:%d/mcp (execute, resume)\n", x.box.Port)
		return err
	})
}

// enabled sets cmd's action: load the box, refuse one without Executor,
// then run.
func (x *executorCmd) enabled(cmd *cobra.Command, run func(cmd *cobra.Command) error) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := x.load(cmd, true); err != nil {
			return err
		}
		return run(cmd)
	}
	return cmd
}

func (x *executorCmd) connectHermesCmd() *cobra.Command {
	var keyStdin bool
	cmd := x.enabled(&cobra.Command{
		Use:   "connect-hermes",
		Short: "Register Executor as an MCP server of Hermes",
		Long: "connect-hermes hands the API key (from the keyring, or stdin with --api-key-stdin) to the agent in\n" +
			"the box, which checks Executor's MCP surface at the address Hermes uses, writes Hermes' .env and\n" +
			"config.yaml, runs `hermes mcp test executor` as the hermes user (putting both files back if it\n" +
			"fails) and restarts the gateway.",
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command) error {
		key, err := x.connectKey(cmd, keyStdin)
		if err != nil {
			return err
		}
		// The key travels on the relay's stdin, never in argv.
		if err := x.box.Agent.ConnectHermes(cmd.Context(), key); err != nil {
			return fmt.Errorf("connecting Hermes: %w", err)
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), "Hermes is connected to Executor as MCP server `executor`; start a new Hermes CLI session to load it")
		return err
	})
	cmd.Flags().BoolVar(&keyStdin, "api-key-stdin", false, "read the API key from stdin instead of the keyring (hosts without one)")
	return cmd
}

// connectKey is the stored key, or the first line of stdin.
func (x *executorCmd) connectKey(cmd *cobra.Command, fromStdin bool) (string, error) {
	if !fromStdin {
		return x.box.APIKey()
	}
	raw, err := x.deps.readSecret(cmd.InOrStdin(), cmd.ErrOrStderr())
	if err != nil {
		return "", fmt.Errorf("reading the API key: %w", err)
	}
	return box.NormalizeKey(raw)
}

// writeIndentedJSON prints v as indented JSON with what a terminal could
// obey escaped (the values come from the box).
func writeIndentedJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.JSON(b), '\n'))
	return err
}

// readAPIKey asks for the Executor API key (no echo on a terminal).
func readAPIKey(in io.Reader, w io.Writer) (string, error) {
	return prompt.Secret(in, w, "Executor API key")
}
