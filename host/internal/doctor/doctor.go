// Package doctor qualifies the smolvm installed on this host for
// hermes-box: with a throwaway machine it measures, one row per capability,
// what hermes-box relies on (boot, exec's exit statuses and --timeout, a
// large exec -i, loopback-only published ports, the strict egress floor,
// the VMM's confinement, the pack layout, secrets dropped by create --from,
// extended attributes surviving pack create), and records the verdict for that smolvm binary (path and
// content hash), so that a release outside the table that passes is
// accepted and a failing one is refused naming the row.
package doctor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// The rows, in the order they run.
const (
	RowFlags       = "flags"
	RowBoot        = "boot"
	RowVMM         = "vmm-confined"
	RowPorts       = "loopback-ports"
	RowEgress      = "egress-floor-strict"
	RowExitStatus  = "exec-exit-status"
	RowTimeout     = "exec-timeout"
	RowLargeStdin  = "exec-stdin-8mib"
	RowPackLayout  = "pack-layout"
	RowSecrets     = "secrets-dropped"
	RowXattrs      = "xattrs-pack"
	verdictPass    = "pass"
	verdictFail    = "fail"
	verdictNotRun  = "not-run"
	throwawayImage = pins.UbuntuImage
)

// Row is one capability's verdict.
type Row struct {
	Name    string  `json:"name"`
	Verdict string  `json:"verdict"` // pass, fail or not-run
	Detail  string  `json:"detail"`
	Seconds float64 `json:"seconds"`
}

// Report is one doctor run.
type Report struct {
	// Run names the run: the time it started, RFC 3339.
	Run     string        `json:"run"`
	Smolvm  string        `json:"smolvm"`
	Listed  bool          `json:"listed"` // the release is in the table
	Machine string        `json:"machine"`
	Rows    []Row         `json:"rows"`
	Passed  bool          `json:"passed"`
	Binary  smolvm.Binary `json:"binary"`
}

// Failed lists the rows that did not pass.
func (r *Report) Failed() []string {
	var out []string
	for _, row := range r.Rows {
		if row.Verdict != verdictPass {
			out = append(out, row.Name)
		}
	}
	return out
}

// VM is what the doctor needs of the smolvm driver.
type VM interface {
	Release(ctx context.Context) (pins.SmolvmRelease, error)
	Unlisted() bool
	Create(ctx context.Context, s smolvm.CreateSpec) error
	Update(ctx context.Context, s smolvm.UpdateSpec) error
	Start(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
	Delete(ctx context.Context, name string, force bool) error
	Status(ctx context.Context, name string) (smolvm.Machine, error)
	Exec(ctx context.Context, s smolvm.ExecSpec) (smolvm.Result, error)
	PackCreate(ctx context.Context, s smolvm.PackSpec) error
	CheckExtracted(ctx context.Context, name string) error
	VMMConfinement(m smolvm.Machine) smolvm.Confinement
	RecordDoctor(run smolvm.DoctorRun) error
}

// Loopback checks that a published port listens on loopback only, and
// that the machine's VMM (root) holds it.
type Loopback interface {
	CheckLoopback(ctx context.Context, port int) error
	CheckOwner(ctx context.Context, port, root int) error
}

// Doctor is one qualification run.
type Doctor struct {
	VM       VM
	Listener Loopback
	// Gateways finds the host's LAN gateway the egress row probes.
	Gateways Gateways
	// Name is the throwaway machine's; Name+"-packed" is the one created
	// from its pack.
	Name string
	// Port is a free host port the throwaway machine publishes.
	Port int
	// Dir holds the pack for the run; it is removed afterwards.
	Dir string
	// StepTimeout bounds each row.
	StepTimeout time.Duration
	// Now is time.Now when nil.
	Now func() time.Time
}

// Run qualifies the smolvm on PATH, deletes what it created and records
// the verdict for the binary; the report says which rows passed.
func (d *Doctor) Run(ctx context.Context) (*Report, error) {
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	rep := &Report{Run: now().UTC().Format(time.RFC3339), Machine: d.Name}
	defer d.cleanup()
	s := &state{d: d, rep: rep, probeValue: rand.Text(), xattrValue: rand.Text()}
	s.row(ctx, RowFlags, s.flags)
	s.row(ctx, RowBoot, s.boot)
	s.row(ctx, RowVMM, s.vmm)
	s.row(ctx, RowPorts, s.ports)
	s.row(ctx, RowEgress, s.egressFloor)
	s.row(ctx, RowExitStatus, s.exitStatus)
	s.row(ctx, RowTimeout, s.timeout)
	s.row(ctx, RowLargeStdin, s.largeStdin)
	s.row(ctx, RowPackLayout, s.packLayout)
	s.row(ctx, RowSecrets, s.secrets)
	s.row(ctx, RowXattrs, s.xattrsPack)
	rep.Passed = len(rep.Failed()) == 0
	if rep.Smolvm == "" {
		return rep, nil // nothing to record a verdict for
	}
	if err := d.VM.RecordDoctor(smolvm.DoctorRun{Run: rep.Run, Passed: rep.Passed, Failed: rep.Failed()}); err != nil {
		return rep, fmt.Errorf("recording the verdict: %w", err)
	}
	return rep, nil
}

// cleanup deletes the throwaway machines and the pack, on a fresh context
// (the run's may be cancelled).
func (d *Doctor) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*d.StepTimeout)
	defer cancel()
	for _, name := range []string{d.Name + "-packed", d.Name} {
		if _, err := d.VM.Status(ctx, name); err == nil {
			_ = d.VM.Delete(ctx, name, true)
		}
	}
	_ = os.RemoveAll(d.Dir)
}

// state carries a run: the report and whether the machine runs.
type state struct {
	d       *Doctor
	rep     *Report
	blocked string // the row whose failure stops the rest
	// probeValue is the throwaway secret's value (secrets row).
	probeValue string
	// xattrValue is the attribute's value, and markErr why it could not be
	// set before the pack (xattrs row).
	xattrValue string
	markErr    error
}

// row runs one row, bounded, unless an earlier one it needs failed.
func (s *state) row(ctx context.Context, name string, fn func(context.Context) (string, error)) {
	if s.blocked != "" {
		s.rep.Rows = append(s.rep.Rows, Row{Name: name, Verdict: verdictNotRun, Detail: "not run: " + s.blocked + " failed"})
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.d.StepTimeout)
	defer cancel()
	detail, err := fn(ctx)
	r := Row{Name: name, Verdict: verdictPass, Detail: detail, Seconds: time.Since(start).Seconds()}
	if err != nil {
		r.Verdict, r.Detail = verdictFail, err.Error()
		switch name {
		case RowFlags, RowBoot, RowPackLayout: // the rows after need what they make
			s.blocked = name
		}
	}
	s.rep.Rows = append(s.rep.Rows, r)
}

func (s *state) flags(ctx context.Context) (string, error) {
	r, err := s.d.VM.Release(ctx)
	if err != nil {
		return "", err
	}
	s.rep.Smolvm, s.rep.Listed = r.Version, !s.d.VM.Unlisted()
	return fmt.Sprintf("smolvm %s lists every flag hermes-box passes", r.Version), nil
}

// boot creates and starts the throwaway machine as the builder is: an
// image machine with virtio-net, publishing Port. A VMM refused for its
// confinement still booted: the vmm row reports it.
func (s *state) boot(ctx context.Context) (string, error) {
	d := s.d
	if err := d.VM.Create(ctx, smolvm.CreateSpec{Name: d.Name, Image: throwawayImage, Net: true, NetBackend: "virtio-net",
		Ports: []smolvm.Port{{Host: d.Port, Guest: d.Port}}}); err != nil {
		return "", err
	}
	if err := d.VM.Update(ctx, smolvm.UpdateSpec{Name: d.Name, Net: true}); err != nil {
		return "", err
	}
	err := d.VM.Start(ctx, d.Name)
	if errors.Is(err, smolvm.ErrUnconfined) {
		return "booted; its VMM was refused (see " + RowVMM + ")", nil
	}
	if err != nil {
		return "", err
	}
	m, err := d.VM.Status(ctx, d.Name)
	if err == nil && m.State != smolvm.StateRunning {
		err = fmt.Errorf("machine %s is %s after start", d.Name, m.State)
	}
	return fmt.Sprintf("%s from %s started", d.Name, throwawayImage), err
}

// vmm reads the VMM's confinement from the host; a VMM without its
// seccomp filter fails and stops the rows that need the machine.
func (s *state) vmm(ctx context.Context) (string, error) {
	m, err := s.d.VM.Status(ctx, s.d.Name)
	if err != nil {
		return "", err
	}
	c := s.d.VM.VMMConfinement(m)
	switch c.State {
	case smolvm.ConfinementConfined, smolvm.ConfinementNotApplicable:
		return c.Detail, nil
	}
	s.blocked = RowVMM
	if c.State == smolvm.ConfinementUnconfined && m.State != smolvm.StateRunning {
		return "", fmt.Errorf("the VMM ran without a seccomp filter and was stopped: smolvm ignored %s=%s", smolvm.SeccompEnv, smolvm.ConfineEnforce)
	}
	return "", errors.New(c.Detail)
}

// ports checks the published port listens on loopback only and is held by
// the machine's VMM, as the Executor's port is checked for this user
// (smolvm's VMM is not dumpable on Linux, so a normal user reads no
// descriptors of it: listener.CheckOwner).
func (s *state) ports(ctx context.Context) (string, error) {
	d := s.d
	if err := d.Listener.CheckLoopback(ctx, d.Port); err != nil {
		return "", err
	}
	m, err := d.VM.Status(ctx, d.Name)
	if err != nil {
		return "", err
	}
	if m.PID == nil {
		return "", fmt.Errorf("smolvm reports no VMM process of %s (%s)", d.Name, m.State)
	}
	if err := d.Listener.CheckOwner(ctx, d.Port, *m.PID); err != nil {
		return "", err
	}
	return fmt.Sprintf("port %d listens on 127.0.0.1/::1 only, held by the VMM (pid %d)", d.Port, *m.PID), nil
}
