package hermeslink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// BootIDFile is the kernel's id of the current boot.
const BootIDFile = "/proc/sys/kernel/random/boot_id"

// Refresher restarts the Hermes gateway once per boot, after Executor has
// turned healthy, so the gateway (started before Executor was ready)
// discovers Executor's MCP tools.
type Refresher struct {
	Root string
	// HealthURL is Executor's health endpoint inside the box.
	HealthURL string
	HTTP      *http.Client
	// BootID reads the boot's id; nil reads BootIDFile.
	BootID func() (string, error)
	// Restart restarts the gateway; nil means RestartGateway.
	Restart func(ctx context.Context) error
}

// Refreshed is the refresh verb's JSON result.
type Refreshed = protocol.DiscoveryRefresh

// Refresh restarts the gateway unless the marker names this boot already;
// it refuses while Executor's health endpoint does not answer 200.
func (r *Refresher) Refresh(ctx context.Context) (Refreshed, error) {
	id, err := r.bootID()
	if err != nil {
		return Refreshed{}, fmt.Errorf("reading the boot id: %w", err)
	}
	marker := filepath.Join(r.Root, boxlayout.ExecutorDiscoveryRefreshed)
	b, err := os.ReadFile(marker)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Refreshed{}, err
	}
	if strings.TrimSpace(string(b)) == id {
		return Refreshed{BootID: id}, nil
	}
	if err := r.healthy(ctx); err != nil {
		return Refreshed{}, fmt.Errorf("waiting for a healthy Executor (a restarted gateway would not find its tools): %w", err)
	}
	restart := r.Restart
	if restart == nil {
		restart = func(ctx context.Context) error { return RestartGateway(ctx, r.Root) }
	}
	if err := restart(ctx); err != nil {
		return Refreshed{}, fmt.Errorf("restarting the Hermes gateway: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return Refreshed{}, err
	}
	if err := atomicfile.Write(marker, []byte(id+"\n"), 0o600); err != nil {
		return Refreshed{}, err
	}
	return Refreshed{Restarted: true, BootID: id}, nil
}

func (r *Refresher) bootID() (string, error) {
	if r.BootID != nil {
		return r.BootID()
	}
	b, err := os.ReadFile(BootIDFile)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("%s is empty", BootIDFile)
	}
	return id, nil
}

// healthy is one bounded GET of the health endpoint.
func (r *Refresher) healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.HealthURL, nil)
	if err != nil {
		return err
	}
	c := r.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", r.HealthURL, resp.Status)
	}
	return nil
}
