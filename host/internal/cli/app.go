package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/listener"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// boxUser is the guest account the host logs in as.
const boxUser = "boxadmin"

// Test hooks. They change only how hermes-box reaches a box it owns, never
// what it asks smolvm to do, and exist so that tests can stand a real sshd
// and a fake smolvm in for the box.
const (
	envTestSSHUser      = "HBX_TEST_SSH_USER"      // the SSH login user instead of boxadmin
	envTestRelayCommand = "HBX_TEST_RELAY_COMMAND" // the remote command instead of relay.DefaultCommand
	envTestHost         = "HBX_TEST_HOST"          // "supported" skips the host OS/arch check
	envTestTiming       = "HBX_TEST_TIMING"        // "fast" shortens every wait
)

// app is what the box commands share: the configuration, the smolvm
// driver, the streams and the progress renderer.
type app struct {
	cfg    *config.Config
	vm     *smolvm.Driver
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	ui     *progress
	timing timings
	listen listener.Checker
	// hostCheck verifies the host OS and architecture.
	hostCheck func() error
	sshUser   string
	relayCmd  string
	// testPinsDir is the HBX_TEST_AGENT_PINS hook (testpins.go).
	testPinsDir string
}

// timings bounds every wait of the lifecycle.
type timings struct {
	netBoots, netProbes int           // builder network readiness: boots × probes
	netProbeTimeout     time.Duration // one netcheck
	netProbeInterval    time.Duration // between netchecks
	netTotal            time.Duration // all boots together
	pollInterval        time.Duration // port and health polling
	startupDeadline     time.Duration // start to healthy
	callTimeout         time.Duration // one relay or smolvm call that should be quick
	cleanupTimeout      time.Duration // stop/delete during cleanup, on a fresh context
}

func defaultTimings() timings {
	return timings{netBoots: 3, netProbes: 15, netProbeTimeout: 5 * time.Second, netProbeInterval: time.Second,
		netTotal: 5 * time.Minute, pollInterval: 500 * time.Millisecond, startupDeadline: 20 * time.Minute,
		callTimeout: 30 * time.Second, cleanupTimeout: 30 * time.Second}
}

func fastTimings() timings {
	return timings{netBoots: 3, netProbes: 15, netProbeTimeout: 5 * time.Second, netProbeInterval: 5 * time.Millisecond,
		netTotal: time.Minute, pollInterval: 20 * time.Millisecond, startupDeadline: 30 * time.Second,
		callTimeout: 15 * time.Second, cleanupTimeout: 15 * time.Second}
}

// newApp loads the configuration of the project and wires the app.
func newApp(cmd *cobra.Command) (*app, error) {
	root, err := projectRoot()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(root, os.Environ())
	if err != nil {
		return nil, err
	}
	a := &app{
		cfg: cfg, vm: smolvm.New(smolvm.ExecRunner{}),
		stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
		timing: defaultTimings(), hostCheck: checkHostPlatform, sshUser: boxUser,
	}
	format, _ := cmd.Flags().GetString("log-format")
	a.ui = newProgress(a.stderr, format)
	if cfg.ExecutorEnabled {
		a.timing.startupDeadline = 2 * time.Hour
	}
	if v := os.Getenv(envTestTiming); v == "fast" {
		a.timing = fastTimings()
	}
	if os.Getenv(envTestHost) == "supported" {
		a.hostCheck = func() error { return nil }
	}
	if v := os.Getenv(envTestSSHUser); v != "" {
		a.sshUser = v
	}
	a.relayCmd = os.Getenv(envTestRelayCommand)
	a.testPinsDir = os.Getenv(envTestAgentPins)
	if cfg.SmolvmAllowNewer {
		// Every command says so when the release is not in the table.
		a.vm.AllowNewer(true)
		if _, err := a.vm.Release(cmd.Context()); err == nil && a.vm.Unlisted() != "" {
			a.ui.Warn("%s", a.vm.Unlisted())
		}
	}
	return a, nil
}

// projectRoot is $HERMES_BOX_PROJECT_ROOT, else the working directory when
// it holds a Smolfile, else the parent of the executable's directory
// (bin/hermes-box) when that holds one.
func projectRoot() (string, error) {
	if p := os.Getenv("HERMES_BOX_PROJECT_ROOT"); p != "" {
		return filepath.Abs(p)
	}
	if wd, err := os.Getwd(); err == nil && isProject(wd) {
		return wd, nil
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if dir := filepath.Dir(filepath.Dir(exe)); isProject(dir) {
				return dir, nil
			}
		}
	}
	return "", errors.New("could not find the hermes-box project (a directory with a Smolfile): run from it or set HERMES_BOX_PROJECT_ROOT")
}

func isProject(dir string) bool {
	info, err := os.Stat(filepath.Join(dir, "Smolfile"))
	return err == nil && info.Mode().IsRegular()
}

// checkNetworkMode refuses a mode the detected smolvm release cannot
// enforce (its row in the pins table says so); full needs no smolvm call.
func (a *app) checkNetworkMode(ctx context.Context) error {
	if !netmode.Proven(a.cfg.NetworkMode) {
		return netmode.Offer(a.cfg.NetworkMode, pins.SmolvmRelease{}, nil)
	}
	r, err := a.vm.Release(ctx)
	if err != nil {
		return err
	}
	return netmode.Offer(a.cfg.NetworkMode, r, a.cfg.NetworkHosts)
}
