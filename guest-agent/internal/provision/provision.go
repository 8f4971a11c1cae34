// Package provision turns a fresh Ubuntu 24.04 builder into a Hermes Box
// base image. Every change is a Step with a name, a Check that lists what is
// still missing and an Apply that makes it so; steps run in order on an
// injectable root through an injectable command Runner, each under its own
// timeout, and report protocol events. A second run on a provisioned root
// finds nothing pending and changes nothing; Plan lists what a run would do.
package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Status is what a Check found.
type Status struct {
	// Pending lists the changes Apply would make; empty when done.
	Pending []string
	// Skip, when set, says why the step does not apply in this run.
	Skip string
}

// Step is one idempotent unit of provisioning.
type Step struct {
	Name string
	// Timeout bounds Check and Apply together.
	Timeout time.Duration
	Check   func(ctx context.Context, p *Provisioner) (Status, error)
	Apply   func(ctx context.Context, p *Provisioner) error
}

// Emitter receives progress events; *protocol.EventWriter is one.
type Emitter interface {
	Emit(ev protocol.Event) error
}

// Fetcher downloads verified files; *download.Client is one.
type Fetcher interface {
	Fetch(ctx context.Context, url, sha256 string) (download.Result, error)
	Get(ctx context.Context, url string, limit int64) ([]byte, error)
}

// Config is everything a provisioning run depends on.
type Config struct {
	// Root is the file system to provision ("/" in the builder).
	Root string
	Pins Pins
	// Runner runs every external command.
	Runner command.Runner
	// Owner changes and reads file ownership.
	Owner Owner
	// Fetcher downloads artifacts; it must verify digests.
	Fetcher Fetcher
	Events  Emitter
	// Gate applies the gated-approval patch; nil skips that step.
	Gate GatePatcher
	// AuthorizedKeys is boxadmin's authorized_keys; empty skips that step.
	AuthorizedKeys []byte
	// Hostname is mapped to 127.0.1.1; empty reads <root>/etc/hostname.
	Hostname string
	// Sleep waits between retries; nil sleeps for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now stamps the workspace seed id; nil is time.Now.
	Now func() time.Time
	// TestCAPEM is a test server's certificate authority, recorded with the
	// Codex pin for the first boot; only test pins set it.
	TestCAPEM []byte
}

// Provisioner runs the steps of one Config.
type Provisioner struct {
	cfg   Config
	steps []Step
}

// New checks cfg and returns a Provisioner with the full step list.
func New(cfg Config) (*Provisioner, error) {
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("provision root %q must be an absolute path", cfg.Root)
	}
	if cfg.Runner == nil || cfg.Owner == nil || cfg.Fetcher == nil || cfg.Events == nil {
		return nil, errors.New("provision config needs a runner, an owner, a fetcher and an event sink")
	}
	if err := cfg.Pins.validate(); err != nil {
		return nil, err
	}
	if cfg.Sleep == nil {
		cfg.Sleep = download.Sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provisioner{cfg: cfg, steps: Steps()}, nil
}

// StepResult is the outcome of one step in a run.
type StepResult struct {
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Changes []string `json:"changes,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// Report is the outcome of a run or a plan, printed as JSON on stdout.
type Report struct {
	DryRun  bool         `json:"dryRun"`
	Changed int          `json:"changed"`
	Steps   []StepResult `json:"steps"`
}

// StepError is the first failure of a run.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("provision step %q failed: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// The states a StepResult reports.
const (
	stateChanged   = "changed"
	stateUnchanged = "unchanged"
	stateSkipped   = "skipped"
	statePending   = "pending"
)

// Run applies every pending step in order and stops at the first failure.
func (p *Provisioner) Run(ctx context.Context) (Report, error) {
	rep := Report{}
	for i, s := range p.steps {
		p.progress(s.Name, i, len(p.steps))
		res, err := p.runStep(ctx, s)
		rep.Steps = append(rep.Steps, res)
		if err != nil {
			p.stepEvent(s.Name, protocol.StepFailed, protocol.LevelError, err.Error(), nil)
			return rep, &StepError{Step: s.Name, Err: err}
		}
		if res.State == stateChanged {
			rep.Changed++
		}
	}
	p.progress("", len(p.steps), len(p.steps))
	return rep, nil
}

func (p *Provisioner) runStep(ctx context.Context, s Step) (StepResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	res := StepResult{Name: s.Name}
	p.stepEvent(s.Name, protocol.StepStarted, protocol.LevelInfo, s.Name, nil)
	st, err := s.Check(ctx, p)
	if err != nil {
		return res, fmt.Errorf("checking: %w", err)
	}
	switch {
	case st.Skip != "":
		res.State, res.Reason = stateSkipped, st.Skip
		p.stepEvent(s.Name, protocol.StepSkipped, protocol.LevelWarn, st.Skip, nil)
		return res, nil
	case len(st.Pending) == 0:
		res.State = stateUnchanged
		p.stepEvent(s.Name, protocol.StepDone, protocol.LevelInfo, "already done", map[string]string{protocol.FieldChanged: "false"})
		return res, nil
	}
	res.Changes = st.Pending
	if err := s.Apply(ctx, p); err != nil {
		return res, timeoutHint(ctx, s, err)
	}
	after, err := s.Check(ctx, p)
	if err != nil {
		return res, fmt.Errorf("checking after apply: %w", err)
	}
	if len(after.Pending) > 0 {
		return res, fmt.Errorf("still pending after apply: %v", after.Pending)
	}
	res.State = stateChanged
	p.stepEvent(s.Name, protocol.StepDone, protocol.LevelInfo, "done", map[string]string{protocol.FieldChanged: "true", protocol.FieldChanges: strconv.Itoa(len(st.Pending))})
	return res, nil
}

// timeoutHint names the step's own bound when it is what ran out.
func timeoutHint(ctx context.Context, s Step, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("step timeout %s reached: %w", s.Timeout, err)
	}
	return err
}

// Plan runs only the Checks and reports what a run would change.
func (p *Provisioner) Plan(ctx context.Context) (Report, error) {
	rep := Report{DryRun: true}
	for _, s := range p.steps {
		sctx, cancel := context.WithTimeout(ctx, s.Timeout)
		st, err := s.Check(sctx, p)
		cancel()
		if err != nil {
			return rep, &StepError{Step: s.Name, Err: fmt.Errorf("checking: %w", err)}
		}
		res := StepResult{Name: s.Name, State: stateUnchanged, Changes: st.Pending, Reason: st.Skip}
		switch {
		case st.Skip != "":
			res.State = stateSkipped
		case len(st.Pending) > 0:
			res.State = statePending
			rep.Changed++
		}
		rep.Steps = append(rep.Steps, res)
	}
	return rep, nil
}

// path maps an absolute guest path onto the root.
func (p *Provisioner) path(guest string) string { return filepath.Join(p.cfg.Root, guest) }

// run runs c and reports it as a log event first, and while it runs (a
// package manager may say nothing for minutes) as a heartbeat.
func (p *Provisioner) run(ctx context.Context, step string, c command.Command) (command.Output, error) {
	p.emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelDebug, Step: step, Message: "running " + c.String(),
		Fields: map[string]string{protocol.FieldTimeout: c.Timeout.String()}})
	defer protocol.Heartbeat(p.emit, step)()
	return p.cfg.Runner.Run(ctx, c)
}

// fetch downloads a verified artifact and reports it, with a heartbeat
// while it downloads.
func (p *Provisioner) fetch(ctx context.Context, step, name string, a Artifact) (string, error) {
	stop := protocol.Heartbeat(p.emit, step)
	r, err := p.cfg.Fetcher.Fetch(ctx, a.URL, a.SHA256)
	stop()
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", name, err)
	}
	p.emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Step: step, Message: name + " verified",
		Fields: map[string]string{protocol.FieldSHA256: r.SHA256, protocol.FieldStatus: string(r.Status), protocol.FieldURL: a.URL}})
	return r.Path, nil
}

func (p *Provisioner) emit(ev protocol.Event) { _ = p.cfg.Events.Emit(ev) }

func (p *Provisioner) info(step, msg string) {
	p.emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo, Step: step, Message: msg})
}

func (p *Provisioner) stepEvent(step string, st protocol.StepState, lvl protocol.Level, msg string, fields map[string]string) {
	p.emit(protocol.Event{Type: protocol.EventStep, Level: lvl, Step: step, State: st, Message: msg, Fields: fields})
}

func (p *Provisioner) progress(step string, cur, total int) {
	p.emit(protocol.Event{Type: protocol.EventProgress, Level: protocol.LevelInfo, Step: step, Message: "provisioning",
		Progress: &protocol.Progress{Current: int64(cur), Total: int64(total), Unit: "steps"}})
}

// exists reports whether path exists (without following a final symlink).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
