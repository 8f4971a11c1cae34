// Package lifecycle is the disposable lifecycle test for a host with real
// smolvm (`make e2e-smolvm`), the reference's tests/lifecycle.sh in Go:
// it refuses to run without smolvm or without disposable machine and
// builder names and ports, gives the run its own data dir and config, and
// drives the real hermes-box binary through init, status, ssh, logs,
// snapshot, restore (replacement and fresh), executor status and destroy,
// printing a phase table. Its logic is tested with a fake hermes-box and a
// fake smolvm in CI; only a host with smolvm runs it for real.
package lifecycle

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/shared/config"
)

// Config is one disposable run.
type Config struct {
	// Bin is the hermes-box binary.
	Bin string
	// Smolvm is the smolvm found on PATH.
	Smolvm          string
	Machine         string
	Builder         string
	SSHPort         int
	ExecutorEnabled bool
	ExecutorPort    int
}

// Env is what FromEnv reads the run from.
type Env struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// PortFree reports whether a loopback port is free; nil checks by
	// listening on 127.0.0.1.
	PortFree func(int) bool
}

// FromEnv reads and checks the run's settings, as the reference does:
// HERMES_BOX_E2E=1, smolvm on PATH, and a machine name, builder name and
// SSH port (and Executor port when enabled) that are set, are not the
// primary box's (hermes-box.conf's defaults) and are free.
func FromEnv(e Env, bin string) (Config, error) {
	if e.PortFree == nil {
		e.PortFree = portFree
	}
	get := e.Getenv
	if get("HERMES_BOX_E2E") != "1" {
		return Config{}, errors.New("set HERMES_BOX_E2E=1 to run the destructive disposable lifecycle test")
	}
	smolvm, err := e.LookPath("smolvm")
	if err != nil {
		return Config{}, fmt.Errorf("refusing to run: no smolvm on PATH (this test drives real smolvm): %w", err)
	}
	primary := config.Default("")
	c := Config{Bin: bin, Smolvm: smolvm, Machine: get("HERMES_BOX_MACHINE_NAME"), Builder: get("HERMES_BOX_BUILDER_NAME")}
	var errs []error
	if c.Machine == "" || c.Builder == "" {
		errs = append(errs, errors.New("set HERMES_BOX_MACHINE_NAME and HERMES_BOX_BUILDER_NAME to disposable names"))
	}
	if c.Machine == primary.MachineName || c.Builder == primary.BuilderName {
		errs = append(errs, fmt.Errorf("refusing to use the primary machine %q or builder %q", primary.MachineName, primary.BuilderName))
	}
	c.SSHPort, err = disposablePort(get, "HERMES_BOX_SSH_PORT", primary.SSHPort, e.PortFree)
	errs = append(errs, err)
	c.ExecutorEnabled = get("HERMES_BOX_EXECUTOR_ENABLED") == "true"
	if c.ExecutorEnabled {
		c.ExecutorPort, err = disposablePort(get, "HERMES_BOX_EXECUTOR_PORT", primary.ExecutorPort, e.PortFree)
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func disposablePort(get func(string) string, key string, primary int, free func(int) bool) (int, error) {
	v := get(key)
	p, err := strconv.Atoi(v)
	switch {
	case v == "":
		return 0, fmt.Errorf("set %s to a disposable port", key)
	case err != nil || p < 1 || p > 65535:
		return 0, fmt.Errorf("%s: want a port 1-65535, got %q", key, v)
	case p == primary:
		return 0, fmt.Errorf("refusing to use the primary port %d (%s)", p, key)
	case !free(p):
		return 0, fmt.Errorf("%s: port %d is in use on 127.0.0.1", key, p)
	}
	return p, nil
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// environ is the run's environment for hermes-box: the caller's, without
// its HERMES_BOX_* settings, plus the run's names and ports, its own empty
// config file and its own data dir (both under dir).
func (c Config) environ(base []string, dir string) ([]string, error) {
	conf := filepath.Join(dir, "hermes-box.conf")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "HERMES_BOX_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HERMES_BOX_CONFIG="+conf, "HERMES_BOX_DATA_DIR="+filepath.Join(dir, "data"),
		"HERMES_BOX_MACHINE_NAME="+c.Machine, "HERMES_BOX_BUILDER_NAME="+c.Builder,
		"HERMES_BOX_SSH_PORT="+strconv.Itoa(c.SSHPort), "HERMES_BOX_EXECUTOR_ENABLED="+strconv.FormatBool(c.ExecutorEnabled))
	if c.ExecutorEnabled {
		env = append(env, "HERMES_BOX_EXECUTOR_PORT="+strconv.Itoa(c.ExecutorPort))
	}
	return env, nil
}
