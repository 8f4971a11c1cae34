package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// machineDriver is what the backup commands need of smolvm.
type machineDriver interface {
	Exists(ctx context.Context, name string) (bool, error)
	Running(ctx context.Context, name string) (bool, error)
	List(ctx context.Context) ([]string, error)
	// Start boots a machine and waits until it is verified healthy.
	Start(ctx context.Context, name string, port int) error
	// Boot starts a machine without waiting for its services (a machine
	// in restore mode), only until its agent answers.
	Boot(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
	Delete(ctx context.Context, name string) error
	// CreateRestore creates a machine from the base artifact in restore
	// mode (services wait for the restore-ready marker).
	CreateRestore(ctx context.Context, name string, port int) error
	// Agent returns a transport to the machine's agent: smolvm exec for a
	// machine in restore mode, SSH otherwise.
	Agent(ctx context.Context, name string, port int) (relay.Transport, error)
	Version(ctx context.Context) string
}

// boxEnv is the configuration and the drivers of one command.
type boxEnv struct {
	app     *app
	cfg     *config.Config
	drv     machineDriver
	pubKey  []byte // authorized_keys line of the project key
	finger  string
	stdout  io.Writer
	backups string
	// resume is the backup a restore was asked for: when an interrupted
	// cut-over's journal names it, restoring it is how to recover.
	resume string
}

// newMachineDriver builds the smolvm driver of a command; tests may
// replace it.
var newMachineDriver = func(a *app) (machineDriver, error) { return newSmolDriver(a), nil }

// loadBoxEnv loads the configuration and the project key for a command.
func loadBoxEnv(cmd *cobra.Command) (*boxEnv, error) {
	a, err := newApp(cmd)
	if err != nil {
		return nil, err
	}
	cfg := a.cfg
	pub, err := os.ReadFile(cfg.SSHKeyPath() + ".pub")
	if err != nil {
		return nil, fmt.Errorf("reading the SSH public key: %w", err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, fmt.Errorf("parsing %s.pub: %w", cfg.SSHKeyPath(), err)
	}
	drv, err := newMachineDriver(a)
	if err != nil {
		return nil, err
	}
	return &boxEnv{app: a, cfg: cfg, drv: drv, pubKey: ssh.MarshalAuthorizedKey(key), finger: ssh.FingerprintSHA256(key),
		stdout: a.stdout, backups: cfg.BackupsDir()}, nil
}

// locked takes the operation lock (which reaps leftover files and refuses
// while an interrupted cut-over's journal stands, unless this is the
// restore that recovers it), deletes candidate machines an interrupted
// restore left, then runs fn.
func (e *boxEnv) locked(ctx context.Context, fn func() error) error {
	return e.app.withLockResuming(e.resume, func() error {
		removed, err := backup.ReapCandidates(ctx, e.ops(), e.cfg.MachineName)
		for _, n := range removed {
			e.app.ui.Info("removed the leftover candidate machine %s", n)
		}
		if err != nil {
			return fmt.Errorf("reaping candidate machines: %w", err)
		}
		return fn()
	})
}

func (e *boxEnv) meta(label string) backup.Meta {
	return backup.Meta{Machine: e.cfg.MachineName, Label: label, Smolvm: e.drv.Version(context.Background()),
		GOOS: runtime.GOOS, Fingerprint: e.finger, Now: time.Now()}
}

func (e *boxEnv) snapshot(ctx context.Context, label string, leaveStopped bool) (string, error) {
	s := &backup.Snapshot{Ops: e.ops(), BackupsDir: e.backups, Port: e.cfg.SSHPort, Meta: e.meta(label), LeaveStopped: leaveStopped}
	return s.Run(ctx)
}

func (e *boxEnv) ops() *boxOps { return &boxOps{machineDriver: e.drv, env: e} }

// boxOps implements backup.SnapshotOps and backup.MachineOps on the driver
// and the agent's verbs.
type boxOps struct {
	machineDriver
	env *boxEnv
	// stopped are the services StopServices stopped, in stop order.
	stopped []string
}

// sshdService is the box's SSH server in the supervisor's table.
const sshdService = "sshd"

func (o *boxOps) agent(ctx context.Context, name string, port int, argv []string, stdin io.Reader, stdout io.Writer) error {
	a, err := o.Agent(ctx, name, port)
	if err != nil {
		return err
	}
	req := protocol.Request{ProtocolVersion: protocol.Version, Argv: argv, Options: protocol.Options{Stdin: stdin != nil}}
	code, err := a.Run(ctx, req, stdin, stdout, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("agent %v exited with status %d", argv, code)
	}
	return err
}

// StopServices stops, in reverse priority order, the running services
// except sshd: the snapshot's streams still come over SSH. StartServices
// starts the ones it stopped.
func (o *boxOps) StopServices(ctx context.Context, name string) error {
	var out bytes.Buffer
	if err := o.agent(ctx, name, o.env.cfg.SSHPort, []string{"services", "status", "--json"}, nil, &out); err != nil {
		return err
	}
	var st struct {
		Services []health.Service `json:"services"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return fmt.Errorf("decoding the services of %s: %w", name, err)
	}
	o.stopped = nil
	for _, s := range slices.Backward(st.Services) {
		if s.Name == sshdService || s.State != health.ServiceRunning {
			continue
		}
		if err := o.agent(ctx, name, o.env.cfg.SSHPort, []string{"services", "stop", s.Name}, nil, io.Discard); err != nil {
			return err
		}
		o.stopped = append(o.stopped, s.Name)
	}
	return nil
}

func (o *boxOps) StartServices(ctx context.Context, name string) error {
	for _, s := range slices.Backward(o.stopped) {
		if err := o.agent(ctx, name, o.env.cfg.SSHPort, []string{"services", "start", s}, nil, io.Discard); err != nil {
			return err
		}
	}
	o.stopped = nil
	return nil
}

func (o *boxOps) Stream(ctx context.Context, name, part string, w io.Writer) error {
	return o.agent(ctx, name, o.env.cfg.SSHPort, []string{"snapshot", "write", part}, nil, w)
}

func (o *boxOps) FreePort(ctx context.Context) (int, error) { return freeLoopbackPort(ctx) }

func (o *boxOps) SafetySnapshot(ctx context.Context, name string) (string, error) {
	return o.env.snapshot(ctx, "pre-restore", true)
}

// Apply boots the restore-mode machine, streams the backup to the agent's
// `snapshot apply`, then restarts it normally.
func (o *boxOps) Apply(ctx context.Context, name string, port int, dir string) error {
	if err := o.Boot(ctx, name); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(backup.WriteApply(dir, o.env.pubKey, pw)) }()
	err := o.agent(ctx, name, port, []string{"snapshot", "apply"}, pr, io.Discard)
	_ = pr.Close()
	if err != nil {
		return fmt.Errorf("applying %s to %s: %w", filepath.Base(dir), name, err)
	}
	if err := o.Stop(ctx, name); err != nil {
		return err
	}
	return o.Start(ctx, name, port)
}

// Health is the full health check: the agent's report must pass the deep
// check of start.
func (o *boxOps) Health(ctx context.Context, name string, port int) error {
	tr, err := o.Agent(ctx, name, port)
	if err != nil {
		return err
	}
	report, err := o.env.app.health(ctx, tr)
	if err != nil {
		return fmt.Errorf("health of %s: %w", name, err)
	}
	if err := deepCheck(report); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// freeLoopbackPort asks the kernel for a free port on 127.0.0.1.
func freeLoopbackPort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
