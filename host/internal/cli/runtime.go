package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// packCacheMaxBytes raises smolvm 1.0.4's extraction-cache cap (5 GiB) to
// 16 GiB for runtime creation, so the cache's eviction cannot delete the
// layers it has just extracted.
const packCacheMaxBytes = 16 << 30

// Guest ports published on host loopback.
const (
	guestSSHPort      = 22
	guestExecutorPort = 4788
	guestDocumentsDir = "/workspace/work"
)

// runtimeSpec is the box's `machine create --from`.
func (a *app) runtimeSpec(artifact string) smolvm.CreateSpec {
	c := a.cfg
	s := smolvm.CreateSpec{
		Name: c.MachineName, From: artifact, CPUs: c.CPUs, MemoryMiB: c.MemoryMiB,
		StorageGB: c.StorageGB, OverlayGB: c.OverlayGB,
		Ports: []smolvm.Port{{Host: c.SSHPort, Guest: guestSSHPort}},
		Env: []string{
			"HERMES_BOX_EXECUTOR_ENABLED=" + strconv.FormatBool(c.ExecutorEnabled),
			"HERMES_BOX_EXECUTOR_IMAGE=" + c.ExecutorImage,
			"HERMES_BOX_EXECUTOR_HOST_PORT=" + strconv.Itoa(c.ExecutorPort),
		},
		Net:               true,
		PackCacheMaxBytes: packCacheMaxBytes,
		Egress:            netmode.Egress(c.NetworkMode, c.NetworkHosts),
	}
	if c.ExecutorEnabled {
		s.Ports = append(s.Ports, smolvm.Port{Host: c.ExecutorPort, Guest: guestExecutorPort})
	}
	return s
}

// envRestoreMode makes the box's boot wait for the restore-ready marker
// instead of starting its services.
const envRestoreMode = "HERMES_BOX_RESTORE_MODE=true"

// restoreSpec is runtimeSpec for a machine in restore mode: name on SSH
// port, created from the base artifact. A machine other than the box (a
// restore's candidate) publishes only its SSH port.
func (a *app) restoreSpec(name string, port int) smolvm.CreateSpec {
	s := a.runtimeSpec(a.baseArtifact())
	s.Name = name
	s.Ports = []smolvm.Port{{Host: port, Guest: guestSSHPort}}
	if a.cfg.ExecutorEnabled && name == a.cfg.MachineName {
		s.Ports = append(s.Ports, smolvm.Port{Host: a.cfg.ExecutorPort, Guest: guestExecutorPort})
	}
	s.Env = append(s.Env, envRestoreMode)
	return s
}

// createRuntime creates the box from the artifact and checks that its
// packed layers survived extraction; a box that fails here is deleted.
func (a *app) createRuntime(ctx context.Context, artifact string) error {
	return a.createMachine(ctx, a.runtimeSpec(artifact))
}

// createMachine creates a machine from a packed artifact (spec.From) and
// checks that its packed layers survived extraction; a machine that fails
// here is deleted.
func (a *app) createMachine(ctx context.Context, spec smolvm.CreateSpec) (err error) {
	if err := a.checkNetworkMode(ctx); err != nil {
		return err
	}
	name := spec.Name
	done := a.ui.Step("create", name+" from "+spec.From)
	defer func() { done(err) }()
	if err := a.vm.Create(ctx, spec); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if derr := a.removeMachine(name); derr != nil {
				err = errors.Join(err, fmt.Errorf("deleting the half-created %s: %w", name, derr))
			} else {
				err = fmt.Errorf("%w (the machine %s was deleted)", err, name)
			}
		}
	}()
	if err := a.vm.CheckExtracted(ctx, name); err != nil {
		return err
	}
	return a.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true})
}

// pinHostKey reads the guest's host keys out of band (agent `hostkeys`
// through smolvm exec) and pins the ed25519 one.
func (a *app) pinHostKey(ctx context.Context, name string) error {
	done := a.ui.Step("hostkey", "pinning the SSH host key of "+name)
	key, err := a.readHostKey(ctx, name)
	if err == nil {
		err = keys.SaveHostKey(a.cfg.StateDir(), name, key)
	}
	if err == nil {
		a.ui.Info("pinned %s %s", key.Type(), keys.Fingerprint(key))
	}
	done(err)
	return err
}

func (a *app) readHostKey(ctx context.Context, name string) (ssh.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timing.callTimeout)
	defer cancel()
	res, err := a.vm.Exec(ctx, smolvm.ExecSpec{Name: name, Argv: []string{relay.AgentPath, "hostkeys"}})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("agent hostkeys exited with status %d: %s", res.ExitCode, tail(res.Stderr))
	}
	var hk protocol.HostKeys
	if err := json.Unmarshal(res.Stdout, &hk); err != nil {
		return nil, fmt.Errorf("decoding the host keys of %s: %w", name, err)
	}
	for _, k := range hk.Keys {
		if k.Type != ssh.KeyAlgoED25519 {
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("parsing the host key %s of %s: %w", k.Path, name, err)
		}
		if pub.Type() != ssh.KeyAlgoED25519 || (k.Fingerprint != "" && keys.Fingerprint(pub) != k.Fingerprint) {
			return nil, fmt.Errorf("the host key %s of %s does not match its fingerprint", k.Path, name)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("%s reported no ed25519 host key", name)
}

// copyDocuments copies the user's documents into the box's work dir.
func (a *app) copyDocuments(ctx context.Context, name string, docs []string) error {
	for _, d := range docs {
		dst := path.Join(guestDocumentsDir, filepath.Base(d))
		done := a.ui.Step("document", d+" → "+dst)
		err := a.vm.CopyIn(ctx, name, d, dst)
		done(err)
		if err != nil {
			return err
		}
	}
	return nil
}
