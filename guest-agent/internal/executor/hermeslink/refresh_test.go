package hermeslink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

func TestRefreshRestartsOncePerBoot(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" || !healthy.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	root, boot, restarts := t.TempDir(), "boot-1", 0
	r := &Refresher{Root: root, HealthURL: srv.URL + "/api/health", HTTP: srv.Client(),
		BootID:  func() (string, error) { return boot, nil },
		Restart: func(context.Context) error { restarts++; return nil }}

	if _, err := r.Refresh(t.Context()); err == nil || !strings.Contains(err.Error(), "waiting for a healthy Executor") || restarts != 0 {
		t.Fatalf("unhealthy Executor: %v, %d restarts", err, restarts)
	}
	healthy.Store(true)
	steps := []struct {
		boot      string
		restarted bool
	}{{"boot-1", true}, {"boot-1", false}, {"boot-1", false}, {"boot-2", true}, {"boot-2", false}}
	for i, s := range steps {
		boot = s.boot
		res, err := r.Refresh(t.Context())
		if err != nil || res.Restarted != s.restarted || res.BootID != s.boot {
			t.Fatalf("step %d: %+v %v, want restarted=%v", i, res, err, s.restarted)
		}
	}
	if restarts != 2 {
		t.Fatalf("%d restarts over two boots", restarts)
	}
	if b, _ := os.ReadFile(filepath.Join(root, boxlayout.ExecutorDiscoveryRefreshed)); string(b) != "boot-2\n" {
		t.Fatalf("marker %q", b)
	}
}
