package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Locked runs fn under the operation lock (which also reaps what an
// interrupted operation left).
func Locked(b *Box, fn func() error) error { return withLock(b, fn) }

// The states `status` reports for a box, and their exit statuses (README
// "Exit codes").
const (
	StateHealthy   = "healthy"
	StateDegraded  = "degraded"
	StateUnhealthy = "unhealthy"
	StateStopped   = "stopped"
	StateMissing   = "missing"
	// StateBusy is a box that is not healthy while another hermes-box
	// command holds the operation lock (a nightly snapshot stops the
	// gateway): not an alert, the command puts it back when it ends.
	StateBusy = "busy"
)

// ExitBusy is the exit status of `status` for a busy box (README "Exit
// codes"): neither healthy (0) nor unhealthy (1).
const ExitBusy = 5

// StateExitCode is the exit status of `status` for a box in state.
func StateExitCode(state string) int {
	switch state {
	case StateHealthy:
		return userr.ExitOK
	case StateStopped:
		return userr.ExitStopped
	case StateMissing:
		return userr.ExitNoBox
	case StateBusy:
		return ExitBusy
	}
	return userr.ExitFailure
}

// builderFailed adds to the error of a failed builder step what to do:
// re-running init is safe.
func builderFailed(b *Box, name string, err error) error {
	next := "re-run hermes-box init: it is safe (the builder " + name + " is deleted and built again from scratch); " +
		"hermes-box init --keep-builder keeps a failed builder for inspection"
	if h := resourceHint(b, err); h != "" {
		next = h
	} else if b.KeepBuilder {
		next = fmt.Sprintf("inspect it with smolvm machine shell --name %s, delete it with smolvm machine delete --name %s --force, then re-run hermes-box init", name, name)
	}
	return userr.WithHint(fmt.Errorf("building the base image failed: %w", err), next)
}

// cpuWords and memoryWords find smolvm refusing the box's resources.
var (
	cpuWords    = regexp.MustCompile(`(?i)\bv?cpus?\b`)
	memoryWords = regexp.MustCompile(`(?i)\bmem(ory)?\b`)
)

// resourceHint is the next step when smolvm refused the CPUs or memory the
// configuration asks for: the setting is the problem, so running the same
// command again fails the same way; a machine that missed smolvm's boot
// wait gets the driver's next step (its memory). It is "" for any other
// error.
func resourceHint(b *Box, err error) string {
	var se *smolvm.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch {
	case errors.Is(err, smolvm.ErrBootTimeout):
		return userr.Hint(err)
	case cpuWords.MatchString(se.Message):
		return fmt.Sprintf("smolvm refused HERMES_BOX_CPUS=%d (this host has %d CPUs): set a smaller HERMES_BOX_CPUS in %s, then run the command again (unchanged, it fails the same way)",
			b.cfg.CPUs, runtime.NumCPU(), b.cfg.File)
	case memoryWords.MatchString(se.Message):
		return fmt.Sprintf("smolvm refused HERMES_BOX_MEMORY_MIB=%d: set a smaller HERMES_BOX_MEMORY_MIB in %s, then run the command again (unchanged, it fails the same way)",
			b.cfg.MemoryMiB, b.cfg.File)
	}
	return ""
}

// Services lists the names of the box's supervised services (the box must
// run).
func Services(ctx context.Context, b *Box) ([]string, error) {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return nil, err
	}
	if m.State != smolvm.StateRunning {
		return nil, userr.WithHint(fmt.Errorf("%s is %s", m.Name, m.State), "start it with hermes-box start")
	}
	st, err := runningClient(b).ServicesStatus(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(st.Services))
	for i, s := range st.Services {
		names[i] = s.Name
	}
	return names, nil
}

// checkExecutorWiring refuses to (re)start a box created without the
// Executor while the configuration enables it: its helper and published
// port are fixed when the box is created, so a restart could only fail and
// leave the box stopped. Nothing is changed; the hint says what to run.
func checkExecutorWiring(b *Box, m smolvm.Machine) error {
	if !configured(b).ExecutorEnabled {
		return nil
	}
	var raw struct {
		Ports *int `json:"ports"`
	}
	if json.Unmarshal(m.Raw, &raw) != nil || raw.Ports == nil || *raw.Ports >= 2 {
		return nil
	}
	return &userr.Error{
		Err: fmt.Errorf("HERMES_BOX_EXECUTOR_ENABLED=true, but the box %s was created without the Executor (its helper and port %d are set when a box is created); nothing was changed", m.Name, b.cfg.ExecutorPort),
		Next: "either set HERMES_BOX_EXECUTOR_ENABLED=false in hermes-box.conf again, or make a new box with the Executor: " +
			"hermes-box snapshot before-executor && hermes-box destroy --force && hermes-box init " +
			"(the new box starts with a fresh workspace; the old one stays in the backup)",
	}
}

// checkSmolvmVersion wants a supported smolvm release. Missing, it says
// which releases are supported and how to install one; an unsupported one
// is refused with the table and the install command (shared/pins).
func checkSmolvmVersion(ctx context.Context, b *Box) error {
	_, err := b.vm.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pins.ErrUnsupportedSmolvm):
		v, verr := b.vm.Version(ctx)
		if verr != nil {
			v = "on PATH"
		}
		return userr.WithHint(&unsupportedSmolvm{version: v, err: err},
			"install smolvm "+pins.SmolvmRecommended+": "+pins.SmolvmInstallCommand(pins.SmolvmRecommended)+
				" (or, for a release newer than every supported one, qualify it on this host with hermes-box doctor: a binary that passes is accepted)")
	case errors.Is(err, smolvm.ErrDoctorFailed), errors.Is(err, smolvm.ErrFlagMissing), errors.Is(err, smolvm.ErrUnconfined):
		return err
	}
	return userr.WithHint(fmt.Errorf("a supported smolvm is required (supported: %s), and it could not be run: %w", pins.SmolvmTableVersions(), err),
		"install one: "+pins.SmolvmInstallCommand(pins.SmolvmRecommended)+"; check it with smolvm --version, then run the command again")
}

// unsupportedSmolvm is a smolvm release outside the pins table, said
// plainly (the table's capability columns are for whoever maintains it).
type unsupportedSmolvm struct {
	version string
	err     error // wraps pins.ErrUnsupportedSmolvm
}

func (u *unsupportedSmolvm) Error() string {
	return fmt.Sprintf("smolvm %s is not a release hermes-box supports (it supports %s)", u.version,
		strings.ReplaceAll(pins.SmolvmTableVersions(), ",", ", "))
}

func (u *unsupportedSmolvm) Unwrap() error { return u.err }

// restoreHostChecks checks, before a restore creates anything, that this
// host can run the restored box: its platform, smolvm, every host variable
// secret-env.txt maps and, when there is no box yet, the loopback ports.
func restoreHostChecks(ctx context.Context, b *Box) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(b.hostCheck())
	if err := checkSmolvmVersion(ctx, b); err != nil {
		return fmt.Errorf("restore preflight (this host): %w", err)
	}
	add(config.CheckSecrets(b.cfg.Secrets, os.LookupEnv))
	exists, err := b.vm.Exists(ctx, b.cfg.MachineName)
	add(err)
	if err == nil && !exists {
		add(checkPortFree(b.cfg.SSHPort))
		if b.cfg.ExecutorEnabled {
			add(checkPortFree(b.cfg.ExecutorPort))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restore preflight (this host): %w", err)
	}
	return nil
}

// requireMachine fails (saying to run init first) when the box does not
// exist, or while an interrupted restore's journal stands.
func requireMachine(ctx context.Context, b *Box) error {
	_, err := machineState(ctx, b, b.cfg.MachineName)
	return err
}
