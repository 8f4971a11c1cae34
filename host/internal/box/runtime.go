package box

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// packCacheMaxBytes raises smolvm 1.0.4's extraction-cache cap (5 GiB) to
// 16 GiB for runtime creation, so the cache's eviction cannot delete the
// layers it has just extracted.
const packCacheMaxBytes = 16 << 30

// runtimeSpec is the box's `machine create --from`.
func runtimeSpec(b *Box, artifact string) smolvm.CreateSpec {
	c := b.cfg
	s := smolvm.CreateSpec{
		Name: c.MachineName, From: artifact, CPUs: c.CPUs, MemoryMiB: c.MemoryMiB,
		StorageGB: c.StorageGB, OverlayGB: c.OverlayGB,
		Ports: []smolvm.Port{{Host: c.SSHPort, Guest: boxlayout.SSHPort}},
		Env: []string{
			boxlayout.EnvExecutorEnabled + "=" + strconv.FormatBool(c.ExecutorEnabled),
			boxlayout.EnvExecutorImage + "=" + c.ExecutorImage,
			boxlayout.EnvExecutorHostPort + "=" + strconv.Itoa(c.ExecutorPort),
		},
		Net:               true,
		PackCacheMaxBytes: packCacheMaxBytes,
		Egress:            netmode.Egress(c.NetworkMode, c.NetworkHosts),
	}
	if c.ExecutorEnabled {
		s.Ports = append(s.Ports, smolvm.Port{Host: c.ExecutorPort, Guest: boxlayout.ExecutorPort})
	}
	return s
}

// envRestoreMode makes the box's boot wait for the restore-ready marker
// instead of starting its services.
const envRestoreMode = boxlayout.EnvRestoreMode + "=true"

// restoreSpec is runtimeSpec for a machine in restore mode: name on SSH
// port, created from the base artifact. A machine other than the box (a
// restore's candidate) publishes only its SSH port.
func restoreSpec(b *Box, name string, port int) smolvm.CreateSpec {
	s := runtimeSpec(b, BaseArtifact(b))
	s.Name = name
	s.Ports = []smolvm.Port{{Host: port, Guest: boxlayout.SSHPort}}
	if b.cfg.ExecutorEnabled && name == b.cfg.MachineName {
		s.Ports = append(s.Ports, smolvm.Port{Host: b.cfg.ExecutorPort, Guest: boxlayout.ExecutorPort})
	}
	s.Env = append(s.Env, envRestoreMode)
	return s
}

// createRuntime creates the box from the artifact and checks that its
// packed layers survived extraction; a box that fails here is deleted.
func createRuntime(ctx context.Context, b *Box, artifact string) error {
	return createMachine(ctx, b, runtimeSpec(b, artifact))
}

// createMachine creates a machine from a packed artifact (spec.From) and
// checks that its packed layers survived extraction; a machine that fails
// here is deleted.
func createMachine(ctx context.Context, b *Box, spec smolvm.CreateSpec) (err error) {
	if err := checkNetworkMode(ctx, b); err != nil {
		return err
	}
	name := spec.Name
	done := b.ui.Step("create", name+" from "+spec.From)
	defer func() { done(err) }()
	err = b.vm.Create(ctx, spec)
	if err != nil && ctx.Err() == nil {
		return err
	}
	// A create stopped halfway (Ctrl-C) may have left a machine: it goes
	// too.
	defer func() {
		if err != nil {
			if derr := removeMachine(ctx, b, name); derr != nil {
				err = errors.Join(err, fmt.Errorf("deleting the half-created %s: %w", name, derr))
			} else {
				err = fmt.Errorf("%w (the machine %s was deleted)", err, name)
			}
		}
	}()
	if err != nil {
		return err
	}
	if err := b.vm.CheckExtracted(ctx, name); err != nil {
		return err
	}
	if err := b.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true}); err != nil {
		return err
	}
	if name != b.cfg.MachineName {
		return nil
	}
	return recordSettings(b)
}

// pinHostKey reads the guest's host keys out of band (agent `hostkeys`
// through smolvm exec) and pins the ed25519 one.
func pinHostKey(ctx context.Context, b *Box, name string) error {
	done := b.ui.Step("hostkey", "pinning the SSH host key of "+name)
	key, err := readHostKey(ctx, b, name)
	if err == nil {
		err = keys.SaveHostKey(b.cfg.StateDir(), name, key)
	}
	if err == nil {
		b.ui.Info("pinned %s %s", key.Type(), keys.Fingerprint(key))
	}
	done(err)
	return err
}

func readHostKey(ctx context.Context, b *Box, name string) (ssh.PublicKey, error) {
	hk, err := client(b, directRelay(b, name)).HostKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the host keys of %s: %w", name, err)
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
func copyDocuments(ctx context.Context, b *Box, name string, docs []string) error {
	for _, d := range docs {
		dst := path.Join(boxlayout.WorkDir, filepath.Base(d))
		done := b.ui.Step("document", d+" → "+dst)
		err := b.vm.CopyIn(ctx, name, d, dst)
		done(err)
		if err != nil {
			return err
		}
	}
	return nil
}
