package box

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

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/health"
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

// backupRun is one snapshot, restore or package: the box and its project
// key.
type backupRun struct {
	box    *Box
	pubKey []byte // authorized_keys line of the project key
	finger string
	// resume is the backup a restore was asked for: when an interrupted
	// cut-over's journal names it, restoring it is how to recover.
	resume string
}

// backupRun reads the project key for a snapshot, restore or package.
func (b *Box) backupRun() (*backupRun, error) {
	cfg := b.cfg
	pub, err := os.ReadFile(cfg.SSHKeyPath() + ".pub")
	if err != nil {
		return nil, fmt.Errorf("reading the SSH public key: %w", err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, fmt.Errorf("parsing %s.pub: %w", cfg.SSHKeyPath(), err)
	}
	return &backupRun{box: b, pubKey: ssh.MarshalAuthorizedKey(key), finger: ssh.FingerprintSHA256(key)}, nil
}

// locked takes the operation lock (which reaps leftover files and refuses
// while an interrupted cut-over's journal stands, unless this is the
// restore that recovers it), deletes candidate machines an interrupted
// restore left, then runs fn.
func (e *backupRun) locked(ctx context.Context, fn func() error) error {
	return e.box.withLockResuming(e.resume, func() error {
		removed, err := backup.ReapCandidates(ctx, e.ops(), e.box.cfg.MachineName)
		for _, n := range removed {
			e.box.ui.Info("removed the leftover candidate machine %s", n)
		}
		if err != nil {
			return fmt.Errorf("reaping candidate machines: %w", err)
		}
		return fn()
	})
}

func (e *backupRun) meta(label string) backup.Meta {
	return backup.Meta{Machine: e.box.cfg.MachineName, Label: label, Smolvm: e.box.drv.Version(context.Background()),
		GOOS: runtime.GOOS, Fingerprint: e.finger, Now: time.Now()}
}

func (e *backupRun) snapshot(ctx context.Context, label string, leaveStopped bool) (string, error) {
	cfg := e.box.cfg
	s := &backup.Snapshot{Ops: e.ops(), BackupsDir: cfg.BackupsDir(), Port: cfg.SSHPort, Meta: e.meta(label), LeaveStopped: leaveStopped}
	return s.Run(ctx)
}

func (e *backupRun) ops() *boxOps { return &boxOps{machineDriver: e.box.drv, env: e} }

// boxOps implements backup.SnapshotOps and backup.MachineOps on the driver
// and the agent's verbs.
type boxOps struct {
	machineDriver
	env *backupRun
	// stopped are the services StopServices stopped, in stop order.
	stopped []string
}

// sshdService is the box's SSH server in the supervisor's table.
const sshdService = "sshd"

// agent runs a verb in machine name (on SSH port) for the backup; its
// events are not rendered.
func (o *boxOps) agent(ctx context.Context, name string, port int, argv []string, stdin io.Reader, stdout io.Writer) error {
	tr, err := o.Agent(ctx, name, port)
	if err != nil {
		return err
	}
	return Call(ctx, tr, nil, argv, stdin, stdout)
}

// StopServices stops, in reverse priority order, the running services
// except sshd: the snapshot's streams still come over SSH. StartServices
// starts the ones it stopped.
func (o *boxOps) StopServices(ctx context.Context, name string) error {
	var out bytes.Buffer
	if err := o.agent(ctx, name, o.env.box.cfg.SSHPort, []string{"services", "status", "--json"}, nil, &out); err != nil {
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
		if err := o.agent(ctx, name, o.env.box.cfg.SSHPort, []string{"services", "stop", s.Name}, nil, io.Discard); err != nil {
			return err
		}
		o.stopped = append(o.stopped, s.Name)
	}
	return nil
}

func (o *boxOps) StartServices(ctx context.Context, name string) error {
	for _, s := range slices.Backward(o.stopped) {
		if err := o.agent(ctx, name, o.env.box.cfg.SSHPort, []string{"services", "start", s}, nil, io.Discard); err != nil {
			return err
		}
	}
	o.stopped = nil
	return nil
}

func (o *boxOps) Stream(ctx context.Context, name, part string, w io.Writer) error {
	return o.agent(ctx, name, o.env.box.cfg.SSHPort, []string{"snapshot", "write", part}, nil, w)
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
	report, err := o.env.box.health(ctx, tr)
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
