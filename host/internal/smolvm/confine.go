package smolvm

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// The variables that have smolvm confine the VMM process it boots
// (`_boot-vm`, src/cli/internal_boot.rs): unset means off on every
// release; enforce fails closed.
const (
	SeccompEnv     = "SMOLVM_SECCOMP"
	LandlockEnv    = "SMOLVM_LANDLOCK"
	ConfineEnforce = "enforce"
)

// ConfinementSetting is the configuration key that turns the VMM's
// confinement off (shared/config).
const ConfinementSetting = "HERMES_BOX_VMM_CONFINEMENT"

// ErrUnconfined is wrapped when a VMM would run, or runs, without the
// seccomp filter hermes-box asked for.
var ErrUnconfined = errors.New("the VMM is not confined")

// seccompFiltered is the Seccomp field of /proc/<pid>/status for a
// process under a seccomp filter (SECCOMP_MODE_FILTER).
const seccompFiltered = "2"

// host is the platform the driver runs on and how it reads a process's
// seccomp mode; tests replace it.
type host struct {
	goos, goarch string
	// seccompMode returns the Seccomp field of /proc/<pid>/status
	// (confine_linux.go); elsewhere it fails.
	seccompMode func(pid int) (string, error)
}

// ConfineVMM sets whether the calls that boot a VMM ask smolvm to confine
// it and whether Start then checks it (on by default).
func (d *Driver) ConfineVMM(on bool) { d.unconfined = !on }

// confining says whether this host asks for and checks the VMM's
// confinement: Linux, and not turned off.
func (d *Driver) confining() bool { return !d.unconfined && d.host.goos == "linux" }

// confineEnv is the confinement part of a booting call's environment:
// SMOLVM_SECCOMP and SMOLVM_LANDLOCK set to enforce where the release has
// them on this host. A release without seccomp for this architecture is
// refused before anything boots.
func (d *Driver) confineEnv(r pins.SmolvmRelease) ([]string, error) {
	if !d.confining() {
		return nil, nil
	}
	seccomp, landlock := r.VMMConfinement(d.host.goos, d.host.goarch)
	if !seccomp {
		return nil, fmt.Errorf("%w: smolvm %s has no seccomp filter for its VMM on %s/%s (install a release that has one, or set %s=off to run it unconfined)",
			ErrUnconfined, r.Version, d.host.goos, d.host.goarch, ConfinementSetting)
	}
	env := []string{SeccompEnv + "=" + ConfineEnforce}
	if landlock {
		env = append(env, LandlockEnv+"="+ConfineEnforce)
	}
	return env, nil
}

// checkConfined reads the running machine's VMM from the host's /proc:
// it must run under a seccomp filter. Otherwise the machine is stopped
// and the error wraps ErrUnconfined.
func (d *Driver) checkConfined(ctx context.Context, name string) error {
	if !d.confining() {
		return nil
	}
	m, err := d.Status(ctx, name)
	if err != nil {
		return fmt.Errorf("checking the VMM confinement of %s: %w", name, err)
	}
	if _, err := d.vmmSeccomp(m); err == nil {
		return nil
	} else if serr := d.Stop(ctx, name); serr != nil {
		return errors.Join(err, fmt.Errorf("stopping the unconfined machine: %w", serr))
	} else {
		return fmt.Errorf("%w; the machine was stopped", err)
	}
}

// vmmSeccomp returns the seccomp mode of m's VMM process, and an error
// wrapping ErrUnconfined unless it runs under a filter.
func (d *Driver) vmmSeccomp(m Machine) (string, error) {
	if m.PID == nil || *m.PID <= 0 {
		return "", fmt.Errorf("%w: smolvm reports no VMM process for %s (state %s)", ErrUnconfined, m.Name, m.State)
	}
	mode, err := d.host.seccompMode(*m.PID)
	if err != nil {
		return "", fmt.Errorf("%w: reading the seccomp mode of %s's VMM (pid %d): %w", ErrUnconfined, m.Name, *m.PID, err)
	}
	if mode != seccompFiltered {
		return mode, fmt.Errorf("%w: the VMM of %s (pid %d) runs without a seccomp filter (Seccomp: %s in /proc/%d/status) although %s=%s was set",
			ErrUnconfined, m.Name, *m.PID, mode, *m.PID, SeccompEnv, ConfineEnforce)
	}
	return mode, nil
}

// The states of a VMM's confinement.
const (
	ConfinementConfined      = "confined"
	ConfinementUnconfined    = "unconfined"
	ConfinementOff           = "off" // turned off by the configuration
	ConfinementNotApplicable = "not-applicable"
)

// Confinement is what `status` shows of a machine's VMM confinement.
type Confinement struct {
	// State is one of the Confinement* states.
	State string `json:"state"`
	// Detail says what was read, or why nothing was.
	Detail string `json:"detail"`
}

// VMMConfinement reports the confinement of a running machine's VMM.
func (d *Driver) VMMConfinement(m Machine) Confinement {
	switch {
	case d.host.goos != "linux":
		return Confinement{State: ConfinementNotApplicable, Detail: "smolvm confines its VMM with seccomp and Landlock on Linux only"}
	case d.unconfined:
		return Confinement{State: ConfinementOff, Detail: ConfinementSetting + "=off: the VMM runs without seccomp or Landlock"}
	}
	if _, err := d.vmmSeccomp(m); err != nil {
		return Confinement{State: ConfinementUnconfined, Detail: err.Error()}
	}
	return Confinement{State: ConfinementConfined, Detail: fmt.Sprintf("VMM pid %d runs under a seccomp filter (Seccomp: 2)", *m.PID)}
}
