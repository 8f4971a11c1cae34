package probe

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/health"
)

func TestRunChecks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/health" {
			http.NotFound(w, r)
		}
	}))
	defer ok.Close()
	services := []health.Service{{Name: "hermes", State: health.ServiceRunning, PID: 7}, {Name: "executor", State: health.ServiceFatal}}
	tests := []struct {
		spec   CheckSpec
		status health.Status
		msg    string
	}{
		{CheckSpec{Code: "tcp-up", TCP: ln.Addr().String()}, health.StatusHealthy, "listening on"},
		{CheckSpec{Code: "tcp-down", TCP: closedAddr}, health.StatusUnhealthy, "nothing listening"},
		{CheckSpec{Code: "http-up", HTTP: ok.URL + "/api/health"}, health.StatusHealthy, "200 OK"},
		{CheckSpec{Code: "http-404", HTTP: ok.URL + "/nope", Severity: health.SeverityWarning}, health.StatusDegraded, "404"},
		{CheckSpec{Code: "svc-up", Service: "hermes"}, health.StatusHealthy, "RUNNING (pid 7)"},
		{CheckSpec{Code: "svc-fatal", Service: "executor"}, health.StatusUnhealthy, "executor is FATAL"},
		{CheckSpec{Code: "svc-missing", Service: "sshd"}, health.StatusUnhealthy, "not supervised"},
	}
	var specs []CheckSpec
	for _, tt := range tests {
		if err := tt.spec.Validate(); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, tt.spec)
	}
	got := RunChecks(t.Context(), specs, services, time.Now())
	for _, tt := range tests {
		c := got[tt.spec.Code]
		if c.Status != tt.status || !strings.Contains(c.Message, tt.msg) {
			t.Errorf("%s: %s %q, want %s containing %q", tt.spec.Code, c.Status, c.Message, tt.status, tt.msg)
		}
	}
	for _, bad := range []CheckSpec{{Code: "x"}, {Code: "x", TCP: "a", HTTP: "b"}, {TCP: "a"}, {Code: "x", TCP: "a", Severity: "loud"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
