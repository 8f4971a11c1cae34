package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/mcp"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// ExecutorAgent is the agent's verbs about the Executor; *agent.Client is
// one.
type ExecutorAgent interface {
	ExecutorStatus(ctx context.Context, sizes bool) (protocol.ExecutorStatus, error)
	Logs(ctx context.Context, w io.Writer, service string, lines int, follow bool) error
	ConnectHermes(ctx context.Context, key string) error
}

// SecretStore is the OS keyring (macOS Keychain, Linux Secret Service).
type SecretStore interface {
	Get(service, user string) (string, error)
	Set(service, user, secret string) error
	Delete(service, user string) error
}

// Executor is the box's Executor as the host reaches it: its published
// loopback port, the agent's executor verbs and the API key in the OS
// keyring.
type Executor struct {
	Machine string
	Enabled bool
	// Port is Executor's port on the host's loopback.
	Port  int
	Agent ExecutorAgent
	// State is the machine's smolvm state, "missing" when there is none.
	State func(ctx context.Context) (string, error)
	// CheckListener fails unless Port listens on loopback only; every
	// call that talks to Port runs it first.
	CheckListener func(ctx context.Context) error
	// Secrets holds the API key; nil is the OS keyring.
	Secrets SecretStore
	// HTTP talks to Port; nil is a client with a 30 s timeout.
	HTTP *http.Client
}

// ExecutorOf wires the box's Executor: agent verbs over the SSH relay with
// the pinned host key, the machine's state from smolvm, and the
// loopback-only listener check on Executor's port.
func ExecutorOf(b *Box) *Executor {
	c := b.cfg
	return &Executor{Machine: c.MachineName, Enabled: c.ExecutorEnabled, Port: c.ExecutorPort,
		Agent: runningClient(b), State: func(ctx context.Context) (string, error) { return MachineState(ctx, b) },
		CheckListener: func(ctx context.Context) error { return CheckExecutorListener(ctx, b) }}
}

// ErrExecutorDisabled refuses a command that needs Executor in a box
// without it.
var ErrExecutorDisabled error = &userr.Error{Err: errors.New("the Executor is not enabled for this box"), Next: executorRecreate}

// executorRecreate is the next step to a box with the Executor: its helper
// and port are set when a box is created, so the box must be re-created.
const executorRecreate = "the Executor is set when a box is created, so this box must be re-created: " +
	"copy what you want to keep out of /workspace (hermes-box ssh), take a backup of the whole box with " +
	"hermes-box snapshot before-executor, set HERMES_BOX_EXECUTOR_ENABLED=true in hermes-box.conf, then run " +
	"hermes-box destroy --force && hermes-box init (with no box yet: set it and run hermes-box init)"

// ExecutorKeyUser is the keyring account under the per-machine service.
const ExecutorKeyUser = "api-key"

// ExecutorKeyService is the keyring service of machine's API key.
func ExecutorKeyService(machine string) string { return "hermes-box.executor." + machine }

// keyringStore is the OS keyring through zalando/go-keyring.
type keyringStore struct{}

func (keyringStore) Get(s, u string) (string, error) { return keyring.Get(s, u) }
func (keyringStore) Set(s, u, p string) error        { return keyring.Set(s, u, p) }
func (keyringStore) Delete(s, u string) error        { return keyring.Delete(s, u) }

func (e *Executor) secrets() SecretStore {
	if e.Secrets == nil {
		return keyringStore{}
	}
	return e.Secrets
}

// http is the client for Executor's port: the server is in the box, so it
// follows no redirect (the API key goes to the box's endpoint only).
func (e *Executor) http() *http.Client {
	if e.HTTP == nil {
		e.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	return mcp.NoRedirects(e.HTTP)
}

// PortalURL is the Executor portal on the host.
func (e *Executor) PortalURL() string { return "http://localhost:" + strconv.Itoa(e.Port) }

func (e *Executor) mcpURL() string { return "http://127.0.0.1:" + strconv.Itoa(e.Port) + "/mcp" }

// Health checks that Executor's port listens on loopback only, then asks
// its /api/health.
func (e *Executor) Health(ctx context.Context) error {
	if err := e.CheckListener(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(e.Port)+"/api/health", nil)
	if err != nil {
		return err
	}
	resp, err := e.http().Do(req)
	if err != nil {
		return fmt.Errorf("executor health: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("executor health: HTTP %d", resp.StatusCode)
	}
	return nil
}

// APIKey reads this box's key from the keyring.
func (e *Executor) APIKey() (string, error) {
	key, err := e.secrets().Get(ExecutorKeyService(e.Machine), ExecutorKeyUser)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", errors.New("no Executor API key stored for this box: create one in the Executor portal, then run `hermes-box executor auth set`")
	}
	if err != nil {
		return "", fmt.Errorf("reading the Executor API key from the keyring: %w", err)
	}
	return key, nil
}

// KeyStored reports whether an API key is stored.
func (e *Executor) KeyStored() bool {
	_, err := e.secrets().Get(ExecutorKeyService(e.Machine), ExecutorKeyUser)
	return err == nil
}

// StoreKey normalizes raw (NormalizeKey) and stores it in the keyring.
func (e *Executor) StoreKey(raw string) error {
	key, err := NormalizeKey(raw)
	if err != nil {
		return err
	}
	if err := e.secrets().Set(ExecutorKeyService(e.Machine), ExecutorKeyUser, key); err != nil {
		return fmt.Errorf("storing the API key in the keyring: %w", err)
	}
	return nil
}

// ClearKey removes the stored key; removed is false when none was stored.
func (e *Executor) ClearKey() (removed bool, err error) {
	err = e.secrets().Delete(ExecutorKeyService(e.Machine), ExecutorKeyUser)
	switch {
	case errors.Is(err, keyring.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("removing the API key from the keyring: %w", err)
	}
	return true, nil
}

// NormalizeKey trims the key and drops a "Bearer " prefix; the key never
// appears in an error.
func NormalizeKey(raw string) (string, error) {
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

// Client returns an MCP client authenticated with the stored key, once
// the box runs and Executor's port is known to listen on loopback only:
// while the box is stopped, whatever holds the port is not its Executor,
// and the key is never sent to it.
func (e *Executor) Client(ctx context.Context) (*mcp.Client, error) {
	key, err := e.APIKey()
	if err != nil {
		return nil, err
	}
	state, err := e.State(ctx)
	if err != nil {
		return nil, err
	}
	if state != StateRunning {
		return nil, userr.WithHint(fmt.Errorf("the box %s is %s: refusing to send the Executor API key to whatever holds port %d", e.Machine, state, e.Port),
			"hermes-box start")
	}
	if err := e.CheckListener(ctx); err != nil {
		return nil, err
	}
	return mcp.New(e.mcpURL(), key, e.http()), nil
}

// CheckSurface insists on exactly the execute and resume tools.
func (e *Executor) CheckSurface(ctx context.Context) error {
	c, err := e.Client(ctx)
	if err != nil {
		return err
	}
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"execute", "resume"}) {
		return fmt.Errorf("unexpected Executor MCP surface %v: want exactly [execute resume]", names)
	}
	return nil
}

// ExecutorStatus is `executor status --json`.
type ExecutorStatus struct {
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

// Status gathers Executor's state: the machine, its health, the agent's metadata.
func (e *Executor) Status(ctx context.Context, sizes bool) ExecutorStatus {
	v := ExecutorStatus{Enabled: e.Enabled, Machine: e.Machine, URL: e.PortalURL(), AuthStored: e.KeyStored()}
	state, err := e.State(ctx)
	if err != nil {
		v.State, v.HealthError = "unknown", err.Error()
		return v
	}
	v.State = state
	if !e.Enabled || state != StateRunning {
		return v
	}
	if err := e.Health(ctx); err != nil {
		v.HealthError = err.Error()
	} else {
		v.Healthy = true
	}
	if st, err := e.Agent.ExecutorStatus(ctx, sizes); err != nil {
		v.MetadataError = err.Error()
	} else {
		if st.Current != nil {
			v.Image, v.ImageDigest = st.Current.ImageReference, st.Current.ManifestDigest
		}
		v.RuntimeBytes, v.DataBytes = st.RuntimeBytes, st.DataBytes
	}
	return v
}
