package box

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/config"
)

// checkHostPlatform accepts macOS on Apple silicon and, as the second
// supported target, Linux with a usable /dev/kvm.
func checkHostPlatform() error {
	return hostPlatform(runtime.GOOS, runtime.GOARCH, func() error {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		return f.Close()
	})
}

func hostPlatform(goos, goarch string, openKVM func() error) error {
	switch {
	case goos == "darwin" && goarch == "arm64":
		return nil
	case goos == "linux":
		if err := openKVM(); err != nil {
			return fmt.Errorf("hermes-box on Linux needs a usable /dev/kvm for smolvm: %w", err)
		}
		return nil
	}
	return fmt.Errorf("hermes-box runs on macOS ARM64 or on Linux with KVM; this host is %s/%s", goos, goarch)
}

// agentBinary is the agent built for the guest's architecture, which is the
// host's (smolvm runs same-architecture guests).
func agentBinary(b *Box) string {
	return filepath.Join(b.cfg.ProjectRoot, "bin", "hermes-box-agent-linux-"+runtime.GOARCH)
}

// ociHelperBinary is the agent's Executor helper (the image pull) for the
// guest's architecture; a box gets it only when the Executor is enabled.
func ociHelperBinary(b *Box) string {
	return filepath.Join(b.cfg.ProjectRoot, "bin", "hermes-box-agent-oci-linux-"+runtime.GOARCH)
}

// preflight checks everything init needs before it changes anything.
func preflight(ctx context.Context, b *Box, documents []string) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A refused network mode stops init before smolvm is even asked.
	if err := checkNetworkMode(ctx, b); err != nil {
		return fmt.Errorf("init preflight: %w", err)
	}
	add(b.hostCheck())
	add(checkAgentSocket(b))
	add(checkSmolvm(ctx, b))
	add(config.CheckSecrets(b.cfg.Secrets, os.LookupEnv))
	for _, dir := range []string{b.cfg.ImagesDir(), b.cfg.BackupsDir(), b.cfg.StateDir()} {
		add(checkWritable(dir))
	}
	add(checkPortFree(b.cfg.SSHPort))
	if b.cfg.ExecutorEnabled {
		add(checkPortFree(b.cfg.ExecutorPort))
	}
	if info, err := os.Stat(agentBinary(b)); err != nil || !info.Mode().IsRegular() {
		add(fmt.Errorf("the agent for this host's architecture is missing: %s (run make build)", agentBinary(b)))
	}
	if b.cfg.ExecutorEnabled {
		if info, err := os.Stat(ociHelperBinary(b)); err != nil || !info.Mode().IsRegular() {
			add(fmt.Errorf("the Executor is enabled but the agent's Executor helper is missing: %s (run make build)", ociHelperBinary(b)))
		}
	}
	for _, d := range documents {
		if info, err := os.Stat(d); err != nil || !info.Mode().IsRegular() {
			add(fmt.Errorf("document %s is not a readable regular file", d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("init preflight: %w", err)
	}
	return nil
}

// checkAgentSocket refuses a user for whom smolvm's agent socket path
// would be too long to start any machine (macOS; the path's length does
// not depend on the machine's name, so one check covers the box, the
// builder and doctor's machine).
func checkAgentSocket(b *Box) error {
	goos := runtime.GOOS
	if v := hookValue(hooks.hostOS); v != "" {
		goos = v
	}
	return userr.WithHint(smolvm.CheckAgentSocket(goos, os.Getenv, b.cfg.MachineName),
		"nothing was created; set SMOLVM_DATA_DIR to a short directory (for example /Users/Shared/smolvm) for both hermes-box and smolvm, or run them as a user with a shorter home directory, then run the command again")
}

// checkSmolvm wants a supported smolvm release and unused machine names.
func checkSmolvm(ctx context.Context, b *Box) error {
	if err := checkSmolvmVersion(ctx, b); err != nil {
		return err
	}
	ms, err := b.vm.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range ms {
		switch m.Name {
		case b.cfg.MachineName:
			errs = append(errs, userr.WithHint(fmt.Errorf("machine %q already exists", m.Name),
				"the box exists already: hermes-box start starts it (hermes-box status shows it); "+
					"to make a new one, keep the workspace with hermes-box snapshot, then hermes-box destroy --force && hermes-box init "+
					"(or set HERMES_BOX_MACHINE_NAME for a second box)"))
		case b.cfg.BuilderName:
			if ownsLeftBuilder(b, m.Name) {
				b.leftBuilder = true // an interrupted init's: init deletes it
				continue
			}
			errs = append(errs, fmt.Errorf("builder machine %q already exists (left by an interrupted init?): delete it with smolvm machine delete --name %s --force, or set HERMES_BOX_BUILDER_NAME", m.Name, m.Name))
		}
	}
	return errors.Join(errs...)
}

// checkWritable creates and removes a temporary file in dir.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".hermes-box-write-test-*")
	if err != nil {
		return fmt.Errorf("directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// checkPortFree binds the port on 127.0.0.1 and on ::1 (skipped when the
// host has no IPv6 loopback) and releases it.
func checkPortFree(port int) error {
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is not free: %w", port, err)
	}
	ln.Close()
	ln, err = net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil
		}
		return fmt.Errorf("port %d on ::1 is not free: %w", port, err)
	}
	ln.Close()
	return nil
}
