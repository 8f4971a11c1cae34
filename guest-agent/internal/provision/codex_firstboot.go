package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Codex is installed on the box's first boot, into the workspace, not into
// the packed image: its large package made smolvm 1.0.4's pack artifacts
// unreliable (the reference's start script does the same). Provisioning
// records only what the first boot needs to do it, the pin below; the
// first boot fetches the verified archive, lays it out as `codex update`
// maintains it (standalone/releases/<version>-<target>, `current`,
// bin/codex) owned by hermes, and seeds config.toml's defaults when there
// is none.

// CodexPin is everything the first boot needs to install Codex.
type CodexPin struct {
	Version string   `json:"version"`
	Target  string   `json:"target"`
	Archive Artifact `json:"archive"`
	// TestCAPEM is the certificate authority of a test's loopback server;
	// only test pins set it.
	TestCAPEM string `json:"testCAPEM,omitempty"`
}

func (c CodexPin) validate() error {
	if c.Version == "" || c.Target == "" {
		return fmt.Errorf("codex pin: version and target must be set, got %q and %q", c.Version, c.Target)
	}
	if err := c.Archive.validate(); err != nil {
		return fmt.Errorf("codex pin: archive: %w", err)
	}
	return nil
}

// ReadCodexPin reads the pin provisioning recorded under root.
func ReadCodexPin(root string) (CodexPin, error) {
	var c CodexPin
	b, err := os.ReadFile(filepath.Join(root, boxlayout.CodexPinFile))
	if err != nil {
		return c, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", boxlayout.CodexPinFile, err)
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("%s: %w", boxlayout.CodexPinFile, err)
	}
	return c, nil
}

func (p *Provisioner) codexPin() (file, error) {
	c := CodexPin{Version: p.cfg.Pins.CodexVersion, Target: p.cfg.Pins.CodexTarget, Archive: p.cfg.Pins.Codex, TestCAPEM: string(p.cfg.TestCAPEM)}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return file{}, err
	}
	return file{Path: boxlayout.CodexPinFile, Data: append(b, '\n'), Mode: 0o644}, nil
}

func checkCodexPin(_ context.Context, p *Provisioner) (Status, error) {
	f, err := p.codexPin()
	if err != nil {
		return Status{}, err
	}
	s, err := p.fileStatus(f)
	return Status{Pending: s}, err
}

func applyCodexPin(_ context.Context, p *Provisioner) error {
	f, err := p.codexPin()
	if err != nil {
		return err
	}
	return p.writeFile(f)
}

// FirstBootSteps install Codex on the first boot: the package, then
// config.toml's defaults when the workspace has none.
func FirstBootSteps() []Step {
	return []Step{
		{Name: "codex", Timeout: 10 * time.Minute, Check: checkCodex, Apply: applyCodex},
		{Name: "codex-config", Timeout: 10 * time.Second, Check: checkCodexConfigAbsent, Apply: applyCodexConfigAbsent},
	}
}

// NewFirstBoot returns a Provisioner that runs FirstBootSteps for pin. It
// runs no command (cfg.Runner may be nil): the first boot's process starts
// nothing outside its supervisor.
func NewFirstBoot(cfg Config, pin CodexPin) (*Provisioner, error) {
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("provision root %q must be an absolute path", cfg.Root)
	}
	if cfg.Owner == nil || cfg.Fetcher == nil || cfg.Events == nil {
		return nil, errors.New("first boot config needs an owner, a fetcher and an event sink")
	}
	if err := pin.validate(); err != nil {
		return nil, err
	}
	cfg.Pins = Pins{CodexVersion: pin.Version, CodexTarget: pin.Target, Codex: pin.Archive}
	cfg.Runner = noRunner{}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provisioner{cfg: cfg, steps: FirstBootSteps()}, nil
}

// noRunner refuses every command.
type noRunner struct{}

func (noRunner) Run(_ context.Context, c command.Command) (command.Output, error) {
	return command.Output{}, fmt.Errorf("the first boot runs no command (asked for %s)", c)
}

// The first boot seeds Codex's configuration only when there is none: a
// user's edits survive every later boot.
func checkCodexConfigAbsent(_ context.Context, p *Provisioner) (Status, error) {
	if _, err := os.Lstat(p.path(codexConfig.Path)); err == nil {
		return Status{}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Status{}, err
	}
	return Status{Pending: []string{"write " + codexConfig.Path + " (Codex's defaults)"}}, nil
}

func applyCodexConfigAbsent(_ context.Context, p *Provisioner) error {
	return p.writeFile(codexConfig)
}
