package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zalando/go-keyring"
	"golang.org/x/term"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/mcp"
)

// executorAgent runs one agent verb in the box through the relay: argv is
// never parsed by a shell, stdin (may be nil) follows the request line, the
// verb's data arrives on stdout.
type executorAgent interface {
	RunAgent(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error
}

// executorBox is what the executor commands need to know about the box.
type executorBox struct {
	Machine string
	Enabled bool
	// Port is Executor's port on the host's loopback.
	Port  int
	Agent executorAgent
	// State is the machine's smolvm state, "missing" when there is none.
	State func(ctx context.Context) (string, error)
	// CheckListener fails unless Port listens on loopback only; every
	// command runs it before it talks to Port.
	CheckListener func(ctx context.Context) error
}

// secretStore is the OS keyring (macOS Keychain, Linux Secret Service).
type secretStore interface {
	Get(service, user string) (string, error)
	Set(service, user, secret string) error
	Delete(service, user string) error
}

// executorDeps are the boundaries of the executor commands; tests swap them.
type executorDeps struct {
	loadBox func(cmd *cobra.Command) (*executorBox, error)
	secrets secretStore
	http    *http.Client
	openURL func(ctx context.Context, url string) error
	// readSecret reads the API key from a terminal without echo, or the
	// first line of any other stdin.
	readSecret func(in io.Reader, prompt io.Writer) (string, error)
}

func defaultExecutorDeps() executorDeps {
	return executorDeps{
		loadBox: func(cmd *cobra.Command) (*executorBox, error) {
			b, err := loadBox(cmd)
			if err != nil {
				return nil, err
			}
			c := b.Config()
			return &executorBox{Machine: c.MachineName, Enabled: c.ExecutorEnabled, Port: c.ExecutorPort,
				Agent: b, State: b.MachineState, CheckListener: b.CheckExecutorListener}, nil
		},
		secrets:    keyringStore{},
		http:       &http.Client{Timeout: 30 * time.Second},
		openURL:    openBrowser,
		readSecret: readSecret,
	}
}

// keyringStore is the OS keyring through zalando/go-keyring.
type keyringStore struct{}

func (keyringStore) Get(s, u string) (string, error) { return keyring.Get(s, u) }
func (keyringStore) Set(s, u, p string) error        { return keyring.Set(s, u, p) }
func (keyringStore) Delete(s, u string) error        { return keyring.Delete(s, u) }

// keyUser is the keyring account under the per-machine service.
const keyUser = "api-key"

func keyService(machine string) string { return "hermes-box.executor." + machine }

// executorCmd carries the deps and the loaded box into each subcommand.
type executorCmd struct {
	deps executorDeps
	box  *executorBox
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
	box, err := x.deps.loadBox(cmd)
	if err != nil {
		return err
	}
	if needEnabled && !box.Enabled {
		return errors.New("executor is not enabled for this box: set HERMES_BOX_EXECUTOR_ENABLED=true in hermes-box.conf")
	}
	x.box = box
	return nil
}

func (x *executorCmd) portalURL() string { return "http://localhost:" + strconv.Itoa(x.box.Port) }
func (x *executorCmd) mcpURL() string    { return "http://127.0.0.1:" + strconv.Itoa(x.box.Port) + "/mcp" }

// health checks that Executor's port listens on loopback only, then asks
// its /api/health.
func (x *executorCmd) health(ctx context.Context) error {
	if err := x.box.CheckListener(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(x.box.Port)+"/api/health", nil)
	if err != nil {
		return err
	}
	resp, err := x.deps.http.Do(req)
	if err != nil {
		return fmt.Errorf("executor health: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("executor health: HTTP %d", resp.StatusCode)
	}
	return nil
}

// apiKey reads this box's key from the keyring.
func (x *executorCmd) apiKey() (string, error) {
	key, err := x.deps.secrets.Get(keyService(x.box.Machine), keyUser)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", errors.New("no Executor API key stored for this box: create one in the Executor portal, then run `hermes-box executor auth set`")
	}
	if err != nil {
		return "", fmt.Errorf("reading the Executor API key from the keyring: %w", err)
	}
	return key, nil
}

// client returns an MCP client authenticated with the stored key, once
// Executor's port is known to listen on loopback only.
func (x *executorCmd) client(ctx context.Context) (*mcp.Client, error) {
	key, err := x.apiKey()
	if err != nil {
		return nil, err
	}
	if err := x.box.CheckListener(ctx); err != nil {
		return nil, err
	}
	return mcp.New(x.mcpURL(), key, x.deps.http), nil
}

func (x *executorCmd) openCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "open",
		Short: "Open the Executor portal in a browser",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, true); err != nil {
				return err
			}
			if err := x.health(cmd.Context()); err != nil {
				return fmt.Errorf("executor is not answering on %s (is the box running? `hermes-box start`): %w", x.portalURL(), err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), x.portalURL())
			return x.deps.openURL(cmd.Context(), x.portalURL())
		},
	}
}

// openBrowser opens url with the platform's opener; without one the URL
// printed by open is all there is.
func openBrowser(ctx context.Context, url string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return nil
	}
	if err := exec.CommandContext(ctx, path, url).Run(); err != nil {
		return fmt.Errorf("running %s: %w", opener, err)
	}
	return nil
}

// agentExecutorStatus is the agent's `executor status` result, as far as
// the host reads it.
type agentExecutorStatus struct {
	Current *struct {
		ImageReference string `json:"imageReference"`
		ManifestDigest string `json:"manifestDigest"`
	} `json:"current"`
	RuntimeBytes *int64 `json:"runtimeBytes"`
	DataBytes    *int64 `json:"dataBytes"`
}

// executorStatusView is `executor status --json`.
type executorStatusView struct {
	Enabled       bool   `json:"enabled"`
	Machine       string `json:"machine"`
	State         string `json:"state"`
	URL           string `json:"url"`
	Healthy       bool   `json:"healthy"`
	HealthError   string `json:"healthError,omitempty"`
	MetadataError string `json:"metadataError,omitempty"`
	AuthStored    bool   `json:"authStored"`
	Image         string `json:"image,omitempty"`
	ImageDigest   string `json:"imageDigest,omitempty"`
	RuntimeBytes  *int64 `json:"runtimeBytes,omitempty"`
	DataBytes     *int64 `json:"dataBytes,omitempty"`
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
			v := x.status(cmd.Context(), sizes)
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

func (x *executorCmd) status(ctx context.Context, sizes bool) executorStatusView {
	v := executorStatusView{Enabled: x.box.Enabled, Machine: x.box.Machine, URL: x.portalURL()}
	_, err := x.deps.secrets.Get(keyService(x.box.Machine), keyUser)
	v.AuthStored = err == nil
	state, err := x.box.State(ctx)
	if err != nil {
		v.State, v.HealthError = "unknown", err.Error()
		return v
	}
	v.State = state
	if !x.box.Enabled || state != smolvm.StateRunning {
		return v
	}
	if err := x.health(ctx); err != nil {
		v.HealthError = err.Error()
	} else {
		v.Healthy = true
	}
	argv := []string{"executor", "status"}
	if sizes {
		argv = append(argv, "--sizes")
	}
	var out strings.Builder
	var st agentExecutorStatus
	if err := x.box.Agent.RunAgent(ctx, argv, nil, &out); err != nil {
		v.MetadataError = err.Error()
	} else if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		v.MetadataError = "decoding the agent's executor status: " + err.Error()
	} else {
		if st.Current != nil {
			v.Image, v.ImageDigest = st.Current.ImageReference, st.Current.ManifestDigest
		}
		v.RuntimeBytes, v.DataBytes = st.RuntimeBytes, st.DataBytes
	}
	return v
}

func printExecutorStatus(w io.Writer, v executorStatusView) error {
	auth := "not stored"
	if v.AuthStored {
		auth = "stored in the OS keyring"
	}
	fmt.Fprintf(w, "Enabled:    %t\nMachine:    %s (%s)\nPortal:     %s\nAPI key:    %s\n", v.Enabled, v.Machine, v.State, v.URL, auth)
	if !v.Enabled || v.State != smolvm.StateRunning {
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
		fmt.Fprintf(w, "Disk:       runtime %s, data %s\n", humanBytes(*v.RuntimeBytes), humanBytes(*v.DataBytes))
	}
	return nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGT"[i-1])
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
			argv := []string{"logs", "executor", "-n", strconv.Itoa(lines)}
			if follow {
				argv = append(argv, "-f")
			}
			return x.box.Agent.RunAgent(cmd.Context(), argv, nil, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().IntVarP(&lines, "lines", "n", 100, "number of lines to show")
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
			key, err := normalizeKey(raw)
			if err != nil {
				return err
			}
			if err := x.deps.secrets.Set(keyService(x.box.Machine), keyUser, key); err != nil {
				return fmt.Errorf("storing the API key in the keyring: %w", err)
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
			if _, err := x.deps.secrets.Get(keyService(x.box.Machine), keyUser); err == nil {
				state = "stored in the OS keyring"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Executor API key: %s\n", state)
			return nil
		},
	}
	clear := &cobra.Command{
		Use: "clear", Short: "Remove the stored API key", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, false); err != nil {
				return err
			}
			err := x.deps.secrets.Delete(keyService(x.box.Machine), keyUser)
			switch {
			case errors.Is(err, keyring.ErrNotFound):
				fmt.Fprintln(cmd.OutOrStdout(), "No Executor API key was stored")
			case err != nil:
				return fmt.Errorf("removing the API key from the keyring: %w", err)
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "Executor API key removed")
			}
			return nil
		},
	}
	cmd.AddCommand(set, status, clear)
	return cmd
}

// readSecret reads the key without echo from a terminal, else the first
// line of stdin.
func readSecret(in io.Reader, prompt io.Writer) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, "Executor API key (input hidden): ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		return string(b), err
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return line, nil
}

// normalizeKey trims the key and drops a "Bearer " prefix; the key never
// appears in an error.
func normalizeKey(raw string) (string, error) {
	key := strings.TrimSpace(raw)
	if len(key) >= 7 && strings.EqualFold(key[:7], "bearer ") {
		key = strings.TrimSpace(key[7:])
	}
	if key == "" {
		return "", errors.New("the API key is empty")
	}
	for _, r := range key {
		if r <= ' ' || r > '~' || strings.ContainsRune(`"'\#$`+"`", r) {
			return "", errors.New("the API key has a character outside printable ASCII without spaces, quotes, '#', '$' or '\\'")
		}
	}
	return key, nil
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
	c, err := x.client(cmd.Context())
	if err != nil {
		return err
	}
	out, err := c.Execute(cmd.Context(), code)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
		return err
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("decoding the execute result: %w", err)
	}
	return writeIndentedJSON(cmd.OutOrStdout(), v)
}

// checkSurface insists on exactly the execute and resume tools.
func (x *executorCmd) checkSurface(ctx context.Context) error {
	c, err := x.client(ctx)
	if err != nil {
		return err
	}
	return c.CheckExecutorSurface(ctx)
}

func (x *executorCmd) mcpTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-test",
		Short: "Check the authenticated MCP surface (exactly execute and resume)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, true); err != nil {
				return err
			}
			if err := x.checkSurface(cmd.Context()); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Executor MCP OK: http://localhost:%d/mcp (execute, resume)\n", x.box.Port)
			return err
		},
	}
}

func (x *executorCmd) connectHermesCmd() *cobra.Command {
	var keyStdin bool
	cmd := &cobra.Command{
		Use:   "connect-hermes",
		Short: "Register Executor as an MCP server of Hermes",
		Long: "connect-hermes hands the API key (from the keyring, or stdin with --api-key-stdin) to the agent in\n" +
			"the box, which checks Executor's MCP surface at the address Hermes uses, writes Hermes' .env and\n" +
			"config.yaml, runs `hermes mcp test executor` as the hermes user (putting both files back if it\n" +
			"fails) and restarts the gateway.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := x.load(cmd, true); err != nil {
				return err
			}
			key, err := x.connectKey(cmd, keyStdin)
			if err != nil {
				return err
			}
			// The key travels on the relay's stdin, never in argv.
			if err := x.box.Agent.RunAgent(cmd.Context(), []string{"executor", "connect-hermes"}, strings.NewReader(key+"\n"), io.Discard); err != nil {
				return fmt.Errorf("connecting Hermes: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), "Hermes is connected to Executor as MCP server `executor`; start a new Hermes CLI session to load it")
			return err
		},
	}
	cmd.Flags().BoolVar(&keyStdin, "api-key-stdin", false, "read the API key from stdin instead of the keyring (hosts without one)")
	return cmd
}

// connectKey is the stored key, or the first line of stdin.
func (x *executorCmd) connectKey(cmd *cobra.Command, fromStdin bool) (string, error) {
	if !fromStdin {
		return x.apiKey()
	}
	raw, err := x.deps.readSecret(cmd.InOrStdin(), cmd.ErrOrStderr())
	if err != nil {
		return "", fmt.Errorf("reading the API key: %w", err)
	}
	return normalizeKey(raw)
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
