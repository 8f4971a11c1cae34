// Package box is the lifecycle of one hermes-box: init (preflight, the
// disposable builder, the runtime machine), start and stop, status,
// snapshot and restore orchestration, and the executor wiring. A Box is
// the box's data, built once from the project's configuration: the
// configuration, the smolvm driver, the UI and the waits' bounds. Every
// verb is a plain function over it in a file of its own (start.go,
// stop.go, restore.go, ...), as lima's pkg/instance does for an instance;
// the command line (host/internal/cli) only reads flags, calls the verb
// (box.Start(ctx, b)) and renders what it returns.
package box

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/listener"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// UI renders the lifecycle's steps and the agent's events.
type UI interface {
	// Event renders one event of the agent (or of the host).
	Event(ev protocol.Event)
	// Step renders the start of a step and returns the function that
	// renders its end: done when err is nil, failed otherwise.
	Step(name, msg string) func(err error)
	Info(format string, args ...any)
	Warn(format string, args ...any)
}

// Box is one box: its configuration, the smolvm driver and how to reach
// its agent.
type Box struct {
	cfg    *config.Config
	vm     *smolvm.Driver
	ui     UI
	timing timings
	listen listener.Checker
	// hostCheck verifies the host OS and architecture.
	hostCheck func() error
	sshUser   string
	relayCmd  string
	// testPinsDir is the agent pins hook (testpins.go).
	testPinsDir string
	// drv is the machine driver of snapshot, restore and package.
	drv *smolDriver
	// KeepBuilder keeps the builder when a step of init fails in it, for
	// inspection (init --keep-builder).
	KeepBuilder bool
	// leftBuilder is set by init's preflight when the builder an
	// interrupted init of this project left still exists.
	leftBuilder bool
	// wanted is the configuration as loaded when the box was created with
	// other settings (adoptSettings): cfg then holds what it was created
	// with. nil when they agree or nothing is recorded.
	wanted *config.Config
}

// timings bounds every wait of the lifecycle.
type timings struct {
	netBoots, netProbes int           // builder network readiness: boots × probes
	netProbeInterval    time.Duration // between netchecks
	netTotal            time.Duration // all boots together
	pollInterval        time.Duration // port and health polling
	startupDeadline     time.Duration // start to healthy
	callTimeout         time.Duration // one relay or smolvm call that should be quick
	cleanupTimeout      time.Duration // stop/delete during cleanup, on a fresh context
	interruptGrace      time.Duration // what a cleanup step has left once the caller gave up (Ctrl-C)
	heartbeat           time.Duration // between two "waiting for" lines of a wait (waiter)
	machineCheck        time.Duration // between two checks that a waited-on machine still runs
}

func defaultTimings() timings {
	return timings{netBoots: 3, netProbes: 15, netProbeInterval: time.Second,
		netTotal: 5 * time.Minute, pollInterval: 500 * time.Millisecond, startupDeadline: 20 * time.Minute,
		callTimeout: 30 * time.Second, cleanupTimeout: cleanupTimeout, interruptGrace: backup.InterruptTimeout,
		heartbeat: 5 * time.Second, machineCheck: 3 * time.Second}
}

// cleanupTimeout bounds one stop or delete of a machine during cleanup.
// smolvm 1.0.4 bounds its own stop at about 10 s (up to 5 s for the
// guest's shutdown acknowledgement, 2 s after SIGTERM, 3 s after SIGKILL:
// src/agent/client.rs, src/agent/manager.rs, src/process.rs), so 15 s lets
// a real stop (or a forced delete, which stops first) finish; the 30 s it
// replaces only made a hung smolvm hold the command longer. Once the
// caller has given up, the step has interruptGrace at most (10 s, the
// backup package's InterruptTimeout: still past the point where smolvm has
// sent the VM its SIGKILL).
const cleanupTimeout = 15 * time.Second

func fastTimings() timings {
	return timings{netBoots: 3, netProbes: 15, netProbeInterval: 5 * time.Millisecond,
		netTotal: time.Minute, pollInterval: 20 * time.Millisecond, startupDeadline: 30 * time.Second,
		callTimeout: 15 * time.Second, cleanupTimeout: 15 * time.Second, interruptGrace: 2 * time.Second,
		// The tests' waits are short and check exact smolvm conversations:
		// no heartbeat and no machine check, unless "fast-watch" asks.
		heartbeat: time.Hour, machineCheck: time.Hour}
}

// Load finds the project, loads its configuration and builds its Box,
// which renders its progress on ui.
func Load(ui UI) (*Box, error) {
	root, err := projectRoot()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(root, os.Environ())
	if err != nil {
		return nil, err
	}
	return New(cfg, ui), nil
}

// New builds the Box of cfg, applying the test hooks of the environment.
func New(cfg *config.Config, ui UI) *Box {
	b := &Box{
		cfg: cfg, vm: smolvm.New(smolvm.ExecRunner{}), ui: ui,
		timing: defaultTimings(), hostCheck: checkHostPlatform, sshUser: boxlayout.AdminUser,
	}
	if err := adoptSettings(b); err != nil {
		ui.Warn("%v; using the configuration", err)
	}
	if b.cfg.ExecutorEnabled {
		b.timing.startupDeadline = 2 * time.Hour
	}
	switch hookValue(hooks.timing) {
	case "fast":
		b.timing = fastTimings()
	case "fast-watch":
		b.timing = fastTimings()
		b.timing.heartbeat, b.timing.machineCheck = time.Second, 250*time.Millisecond
	}
	switch hookValue(hooks.host) {
	case "supported":
		b.hostCheck = func() error { return nil }
	case "kvm-missing", "kvm-denied":
		// A Linux host whose /dev/kvm is missing or not the user's.
		errno := syscall.ENOENT
		if hookValue(hooks.host) == "kvm-denied" {
			errno = syscall.EACCES
		}
		b.hostCheck = func() error {
			return hostPlatform("linux", runtime.GOARCH, func() error { return &fs.PathError{Op: "open", Path: "/dev/kvm", Err: errno} })
		}
	}
	if v := hookValue(hooks.sshUser); v != "" {
		b.sshUser = v
	}
	b.relayCmd = hookValue(hooks.relayCommand)
	b.testPinsDir = hookValue(hooks.agentPins)
	b.drv = newSmolDriver(b)
	b.vm.RememberIn(smolvm.NewBinaries(cfg.StateDir()))
	b.vm.ConfineVMM(cfg.VMMConfinement != config.ConfinementOff)
	if cfg.VMMConfinement == config.ConfinementOff {
		b.ui.Warn("%s=off: smolvm's VMM runs without its seccomp and Landlock confinement, so a guest that escapes into the VMM acts with your rights on this host", smolvm.ConfinementSetting)
	}
	b.vm.OnNotice(func(msg string) { b.ui.Info("%s", msg) })
	return b
}

// Config is the box's configuration.
func (b *Box) Config() *config.Config { return b.cfg }

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
func checkNetworkMode(ctx context.Context, b *Box) error {
	if !netmode.Proven(b.cfg.NetworkMode) {
		return netmode.Offer(b.cfg.NetworkMode, pins.SmolvmRelease{}, nil)
	}
	r, err := b.vm.Release(ctx)
	if err != nil {
		return err
	}
	return netmode.Offer(b.cfg.NetworkMode, r, b.cfg.NetworkHosts)
}
