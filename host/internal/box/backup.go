package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/backupset"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// backupRun is one snapshot, restore or package: the box and its project
// key.
type backupRun struct {
	box    *Box
	key    ssh.PublicKey
	pubKey []byte // authorized_keys line of the project key
	finger string
	// resume is the backup a restore was asked for: when an interrupted
	// cut-over's journal names it, restoring it is how to recover.
	resume string
	// anchor is the audit anchor a restored backup carries (nil: none).
	anchor *auditanchor.Anchor
	// workspaceOnly is the staged backup a restore --workspace-only
	// applies without its root part ("" for none).
	workspaceOnly string
	// hermes is the Hermes version the box's last full health check
	// reported (a restore records its commit).
	hermes string
}

// loadBackupRun reads the project key for a snapshot, restore or package.
func loadBackupRun(b *Box) (*backupRun, error) {
	cfg := b.cfg
	pub, err := os.ReadFile(cfg.SSHKeyPath() + ".pub")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, userr.NotInitialised("no project SSH key at " + cfg.SSHKeyPath() + ".pub")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the SSH public key: %w", err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, fmt.Errorf("parsing %s.pub: %w", cfg.SSHKeyPath(), err)
	}
	return &backupRun{box: b, key: key, pubKey: ssh.MarshalAuthorizedKey(key), finger: ssh.FingerprintSHA256(key)}, nil
}

// trust is what a backup restored or packaged here must show: the
// project key's signature, or none when legacyOK vouches for it.
func (e *backupRun) trust(legacyOK bool) backup.Trust {
	return backup.Trust{Key: e.key, LegacyOK: legacyOK}
}

// locked takes the operation lock (which reaps leftover files and refuses
// while an interrupted cut-over's journal stands, unless this is the
// restore that recovers it), deletes candidate machines an interrupted
// restore left, then runs fn.
func (e *backupRun) locked(ctx context.Context, fn func() error) error {
	return withLockResuming(e.box, e.resume, func() error {
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

func (e *backupRun) meta(label string, signer ssh.Signer) backup.Meta {
	return backup.Meta{Machine: e.box.cfg.MachineName, Label: label, Smolvm: e.box.drv.Version(context.Background()),
		GOOS: runtime.GOOS, Signer: signer, AuditAnchor: auditAnchorLine(e.box), Box: boxIdentity(e.box), Now: time.Now(),
		Limits: e.limits()}
}

// boxIdentity is the fingerprint of the box's pinned SSH host key: new
// after destroy and init; empty when none is pinned.
func boxIdentity(b *Box) string {
	key, err := keys.LoadHostKey(b.cfg.StateDir(), b.cfg.MachineName)
	if err != nil || key == nil {
		return ""
	}
	return ssh.FingerprintSHA256(key)
}

// limits bound what a snapshot takes from the box and what a restore
// stages: each part within the part cap.
func (e *backupRun) limits() backup.Limits {
	return backup.Limits{MaxPart: e.box.cfg.SnapshotPartCap()}
}

// signer is the project key, which signs every backup: the pair of the
// public key the backups are checked against.
func (e *backupRun) signer() (ssh.Signer, error) {
	path := e.box.cfg.SSHKeyPath()
	signer, err := keys.LoadProjectKey(path)
	if err != nil {
		return nil, fmt.Errorf("the project key signs every backup: %w", err)
	}
	if keys.Fingerprint(signer.PublicKey()) != e.finger {
		return nil, fmt.Errorf("%s is %s, but %s.pub is %s", path, keys.Fingerprint(signer.PublicKey()), path, e.finger)
	}
	return signer, nil
}

// snapshot writes a backup signed with the project key.
func (e *backupRun) snapshot(ctx context.Context, label string, leaveStopped bool) (string, error) {
	cfg := e.box.cfg
	signer, err := e.signer()
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	ops := e.ops()
	ops.mark = !leaveStopped
	s := &backup.Snapshot{Ops: ops, BackupsDir: cfg.BackupsDir(), Port: cfg.SSHPort, Meta: e.meta(label, signer), LeaveStopped: leaveStopped}
	if cfg.SnapshotIncremental {
		s.Incremental = e.incremental(s.Meta)
	}
	return s.Run(ctx)
}

func (e *backupRun) ops() *boxOps { return &boxOps{smolDriver: e.box.drv, env: e} }

// boxOps implements backup.SnapshotOps and backup.MachineOps on the driver
// and the agent's verbs.
type boxOps struct {
	*smolDriver
	env *backupRun
	// stopped are the services StopServices stopped, in stop order.
	stopped []string
	// mark records the services to stop in the state directory first
	// (servicesStoppedMark), for a snapshot that is to start them again.
	mark bool
}

// agent is the agent client of machine name (on SSH port) for the
// backup; its events are not rendered.
func (o *boxOps) agent(ctx context.Context, name string, port int) (*agent.Client, error) {
	tr, err := o.Agent(ctx, name, port)
	if err != nil {
		return nil, err
	}
	return agent.New(tr, nil), nil
}

// StopServices stops, in reverse priority order, the running services
// except sshd: the snapshot's streams still come over SSH. StartServices
// starts the ones it stopped.
func (o *boxOps) StopServices(ctx context.Context, name string) error {
	c, err := o.agent(ctx, name, o.env.box.cfg.SSHPort)
	if err != nil {
		return err
	}
	st, err := c.ServicesStatus(ctx)
	if err != nil {
		return fmt.Errorf("the services of %s: %w", name, err)
	}
	o.stopped = nil
	var stop []string
	for _, s := range slices.Backward(st.Services) {
		if s.Name != boxlayout.SSHDService && s.State == health.ServiceRunning {
			stop = append(stop, s.Name)
		}
	}
	if o.mark && len(stop) > 0 {
		start := slices.Clone(stop)
		slices.Reverse(start)
		if err := markServicesStopped(o.env.box, name, start); err != nil {
			return err
		}
	}
	for _, s := range stop {
		if err := c.StopService(ctx, s); err != nil {
			return err
		}
		o.stopped = append(o.stopped, s)
	}
	return nil
}

func (o *boxOps) StartServices(ctx context.Context, name string) error {
	if len(o.stopped) == 0 {
		return nil
	}
	c, err := o.agent(ctx, name, o.env.box.cfg.SSHPort)
	if err != nil {
		return err
	}
	for _, s := range slices.Backward(o.stopped) {
		if err := c.StartService(ctx, s); err != nil {
			return err
		}
	}
	o.stopped = nil
	if o.mark {
		unmarkServicesStopped(o.env.box)
	}
	return nil
}

func (o *boxOps) Stream(ctx context.Context, name, part string, w io.Writer) error {
	c, err := o.agent(ctx, name, o.env.box.cfg.SSHPort)
	if err != nil {
		return err
	}
	return c.SnapshotWrite(ctx, part, w)
}

func (o *boxOps) FreePort(ctx context.Context) (int, error) { return freeLoopbackPort(ctx) }

func (o *boxOps) SafetySnapshot(ctx context.Context, name string) (string, error) {
	return o.env.snapshot(ctx, safetyLabel, true)
}

// Apply boots the restore-mode machine, streams the backup in dir to the
// agent's `snapshot apply`, then restarts it normally. dir is a staged
// backup, or an incremental backup as saved (the safety snapshot a
// rollback applies), staged here first and removed after.
func (o *boxOps) Apply(ctx context.Context, name string, port int, dir string) error {
	if !chunkstore.IsIncremental(dir) {
		return o.apply(ctx, name, port, dir, filepath.Base(dir))
	}
	e := o.env
	staged, err := backupset.Stage(ctx, dir, e.box.cfg.StateDir(), e.trust(false), e.limits(), e.signer)
	if err != nil {
		return fmt.Errorf("applying %s to %s: %w", filepath.Base(dir), name, err)
	}
	defer func() {
		if err := staged.Remove(); err != nil {
			slog.Warn("removing the staged copy", "error", err)
		}
	}()
	return o.apply(ctx, name, port, staged.Dir, filepath.Base(dir))
}

// apply is Apply of the staged backup in dir, which the errors call
// label. A writer that failed for another reason than the agent having
// closed the stream says why beside the agent's error.
func (o *boxOps) apply(ctx context.Context, name string, port int, dir, label string) error {
	if err := o.Boot(ctx, name); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	var size int64
	parts := backup.Parts
	if dir == o.env.workspaceOnly {
		parts = []backup.Part{{Name: boxlayout.PartWorkspace, File: backup.FileWorkspace}}
	}
	for _, p := range parts {
		if fi, err := os.Stat(filepath.Join(dir, p.File)); err == nil {
			size += fi.Size()
		}
	}
	c, err := o.agent(ctx, name, port)
	if err != nil {
		return err
	}
	w, done := progress.Track(ctx, "restore "+name, size, pw)
	werr := make(chan error, 1)
	go func() {
		err := backup.WriteApplyParts(dir, o.env.pubKey, parts, w)
		pw.CloseWithError(err)
		werr <- err
	}()
	err = c.SnapshotApply(ctx, pr)
	_ = pr.Close()
	if serr := <-werr; serr != nil && !errors.Is(serr, io.ErrClosedPipe) {
		err = errors.Join(fmt.Errorf("sending the backup: %w", serr), err)
	}
	done(err)
	if err != nil {
		return fmt.Errorf("applying %s to %s: %w", label, name, err)
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
	report, err := healthOf(ctx, o.env.box, tr)
	if err != nil {
		return fmt.Errorf("health of %s: %w", name, err)
	}
	if err := deepCheck(report); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if name == o.env.box.cfg.MachineName && report.Gate != nil {
		o.env.hermes = report.Gate.HermesVersion
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
