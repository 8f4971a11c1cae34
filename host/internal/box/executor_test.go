package box

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// mapStore is a keyring in memory.
type mapStore map[string]string

func (m mapStore) Get(s, u string) (string, error) {
	v, ok := m[s+"/"+u]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}

func (m mapStore) Set(s, u, p string) error { m[s+"/"+u] = p; return nil }

func (m mapStore) Delete(s, u string) error {
	if _, ok := m[s+"/"+u]; !ok {
		return keyring.ErrNotFound
	}
	delete(m, s+"/"+u)
	return nil
}

// executorAgent answers executor status with one image.
type executorAgent struct{ err error }

func (a executorAgent) ExecutorStatus(context.Context, bool) (protocol.ExecutorStatus, error) {
	size := int64(42)
	return protocol.ExecutorStatus{Current: &protocol.ExecutorRelease{ImageReference: "img", ManifestDigest: "sha256:d"}, DataBytes: &size}, a.err
}

func (executorAgent) Logs(context.Context, io.Writer, string, int, bool) error { return nil }
func (executorAgent) ConnectHermes(context.Context, string) error              { return nil }

// TestExecutorStatusAndKey drives the Executor's status and API key over a
// loopback stand-in for its port: the status of a disabled, a stopped, a
// healthy and a failing Executor, the key's normalisation, storage and
// removal, and the refusal to send the key while the box does not run.
func TestExecutorStatusAndKey(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	state := StateRunning
	listener := error(nil)
	store := mapStore{}
	e := &Executor{Machine: "hermes-box", Enabled: true, Port: port, Agent: executorAgent{}, Secrets: store,
		State:         func(context.Context) (string, error) { return state, nil },
		CheckListener: func(context.Context) error { return listener }}
	ctx := t.Context()

	if v := e.Status(ctx, true); !v.Healthy || v.State != StateRunning || v.Image != "img" || *v.DataBytes != 42 || v.AuthStored {
		t.Errorf("healthy status %+v", v)
	}
	status = http.StatusInternalServerError
	if v := e.Status(ctx, false); v.Healthy || !strings.Contains(v.HealthError, "HTTP 500") {
		t.Errorf("failing status %+v", v)
	}
	listener = errors.New("refusing to use Executor's port: wide")
	if v := e.Status(ctx, false); v.Healthy || !strings.Contains(v.HealthError, "wide") {
		t.Errorf("status behind a wide listener %+v", v)
	}
	e.Agent = executorAgent{err: errors.New("no executor verb")}
	if v := e.Status(ctx, false); v.MetadataError != "no executor verb" {
		t.Errorf("status without the agent's metadata %+v", v)
	}
	state = StateStopped
	if v := e.Status(ctx, false); v.State != StateStopped || v.HealthError != "" {
		t.Errorf("stopped status %+v", v)
	}
	e.Enabled, state = false, StateRunning
	if v := e.Status(ctx, false); v.Healthy || v.HealthError != "" || v.Enabled {
		t.Errorf("disabled status %+v", v)
	}

	if _, err := e.APIKey(); err == nil || !strings.Contains(err.Error(), "executor auth set") {
		t.Errorf("no key: %v", err)
	}
	for _, bad := range []string{"", "  ", "has space", "quote\"d", "dollar$"} {
		err := e.StoreKey(bad)
		if err == nil || strings.TrimSpace(bad) != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("key %q stored or named in the error: %v", bad, err)
		}
	}
	if err := e.StoreKey("  Bearer exec_ABC123 \n"); err != nil {
		t.Fatal(err)
	}
	if key, err := e.APIKey(); err != nil || key != "exec_ABC123" || !e.KeyStored() {
		t.Errorf("stored key %q %v", key, err)
	}
	state = StateStopped
	if _, err := e.Client(ctx); err == nil || !strings.Contains(err.Error(), "refusing to send the Executor API key") {
		t.Errorf("a client of a stopped box: %v", err)
	}
	state, listener = StateRunning, nil
	if c, err := e.Client(ctx); err != nil || c == nil {
		t.Errorf("a client of the running box: %v", err)
	}
	for _, want := range []bool{true, false} {
		if removed, err := e.ClearKey(); err != nil || removed != want {
			t.Errorf("clear: removed %v %v, want %v", removed, err, want)
		}
	}
	if e.PortalURL() != "http://localhost:"+u.Port() {
		t.Errorf("portal %s", e.PortalURL())
	}
}
