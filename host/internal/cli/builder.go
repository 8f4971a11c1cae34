package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Guest paths used while building.
const (
	guestAuthorizedKeys = "/tmp/hermes-box-authorized-keys"
	baseArtifactName    = "hermes-base.smolmachine"
)

// baseArtifact is the packed base image the box is created from.
func (a *app) baseArtifact() string { return filepath.Join(a.cfg.ImagesDir(), baseArtifactName) }

// buildBase builds the base image in a disposable builder and returns the
// artifact's path. The builder is deleted whatever happens.
func (a *app) buildBase(ctx context.Context) (artifact string, err error) {
	name := a.cfg.BuilderName
	defer func() {
		done := a.ui.Step("builder-delete", name)
		derr := a.removeMachine(name)
		done(derr)
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting builder %s: %w (delete it with smolvm machine delete --name %s --force)", name, derr, name))
		}
	}()
	if err := a.createBuilder(ctx, name); err != nil {
		return "", err
	}
	if err := a.installAgent(ctx, name); err != nil {
		return "", err
	}
	if err := a.waitBuilderNetwork(ctx, name); err != nil {
		return "", err
	}
	if err := a.provision(ctx, name); err != nil {
		return "", err
	}
	done := a.ui.Step("builder-stop", name)
	err = a.vm.Stop(ctx, name)
	done(err)
	if err != nil {
		return "", err
	}
	return a.pack(ctx, name)
}

// createBuilder creates the builder with a real NIC (virtio-net, not the
// portless TSI default) and boots it.
func (a *app) createBuilder(ctx context.Context, name string) error {
	c := a.cfg
	done := a.ui.Step("builder-create", fmt.Sprintf("%s from %s with build-time networking", name, pins.UbuntuImage))
	err := a.vm.Create(ctx, smolvm.CreateSpec{Name: name, Image: pins.UbuntuImage, CPUs: c.CPUs, MemoryMiB: c.MemoryMiB,
		StorageGB: c.StorageGB, OverlayGB: c.OverlayGB, Net: true, NetBackend: "virtio-net"})
	done(err)
	if err != nil {
		return err
	}
	// 1.0.4 can record network=true and still boot without a NIC: apply
	// --net again before the first boot.
	if err := a.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true}); err != nil {
		return err
	}
	done = a.ui.Step("builder-start", name)
	err = a.vm.Start(ctx, name)
	done(err)
	return err
}

// installAgent copies the agent for the guest's architecture and the
// project's public key into the builder.
func (a *app) installAgent(ctx context.Context, name string) error {
	done := a.ui.Step("agent-copy", a.agentBinary())
	err := a.vm.CopyIn(ctx, name, a.agentBinary(), relay.AgentPath)
	if err == nil {
		// smolvm cp does not keep the executable bit.
		err = a.execOK(ctx, name, "/bin/chmod", "0755", relay.AgentPath)
	}
	if err == nil && a.cfg.ExecutorEnabled {
		err = a.vm.CopyIn(ctx, name, a.ociHelperBinary(), ociHelperPath)
		if err == nil {
			err = a.execOK(ctx, name, "/bin/chmod", "0755", ociHelperPath)
		}
	}
	if err == nil {
		err = a.vm.CopyIn(ctx, name, a.cfg.SSHKeyPath()+keys.PubSuffix, guestAuthorizedKeys)
	}
	done(err)
	return err
}

// ociHelperPath is where the agent looks for its Executor helper: beside it.
const ociHelperPath = relay.AgentPath + "-oci"

// execOK runs a short command in the machine and wants status 0.
func (a *app) execOK(ctx context.Context, name string, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, a.timing.callTimeout)
	defer cancel()
	res, err := a.vm.Exec(ctx, smolvm.ExecSpec{Name: name, Argv: argv})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s in %s exited with status %d: %s", argv[0], name, res.ExitCode, tail(res.Stderr))
	}
	return nil
}

// waitBuilderNetwork runs the agent's netcheck until the builder has an
// IPv4 default route and DNS: up to netProbes probes per boot and netBoots
// boots, cycling the builder (stop, update --net, start) in between.
func (a *app) waitBuilderNetwork(ctx context.Context, name string) error {
	t := a.timing
	ctx, cancel := context.WithTimeout(ctx, t.netTotal)
	defer cancel()
	done := a.ui.Step("network", "waiting for the builder's IPv4 route and DNS")
	var last error
	for boot := 1; boot <= t.netBoots; boot++ {
		if boot > 1 {
			a.ui.Warn("builder network unavailable after boot %d/%d; restarting the builder", boot-1, t.netBoots)
			if err := a.cycleBuilder(ctx, name); err != nil {
				done(err)
				return err
			}
		}
		for probe := 1; probe <= t.netProbes; probe++ {
			if last = a.netcheck(ctx, name); last == nil {
				done(nil)
				return nil
			}
			if ctx.Err() != nil {
				break
			}
			if probe < t.netProbes {
				sleep(ctx, t.netProbeInterval)
			}
		}
	}
	err := fmt.Errorf("builder %s has no usable IPv4 route or DNS after %d boots: %w", name, t.netBoots, last)
	done(err)
	return err
}

func (a *app) netcheck(ctx context.Context, name string) error {
	res, err := a.vm.Exec(ctx, smolvm.ExecSpec{Name: name, Argv: []string{relay.AgentPath, "netcheck"}, Timeout: a.timing.netProbeTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("netcheck exited with status %d: %s", res.ExitCode, tail(res.Stderr))
	}
	return nil
}

func (a *app) cycleBuilder(ctx context.Context, name string) error {
	if err := a.vm.Stop(ctx, name); err != nil {
		return err
	}
	if err := a.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true}); err != nil {
		return err
	}
	return a.vm.Start(ctx, name)
}

// provisionArgv is the agent's provision request. Digests for artifacts the
// pins do not cover travel only when the user configured them.
func (a *app) provisionArgv() []string {
	argv := []string{"provision", "--authorized-keys", guestAuthorizedKeys, "--hermes-commit", a.cfg.HermesCommit}
	if a.cfg.UVSHA256 != "" {
		argv = append(argv, "--uv-sha256", a.cfg.UVSHA256)
	}
	if a.cfg.CodexSHA256 != "" {
		argv = append(argv, "--codex-sha256", a.cfg.CodexSHA256)
	}
	return argv
}

// provision runs the agent's provision verb through the smolvm-exec
// transport, rendering its progress.
func (a *app) provision(ctx context.Context, name string) (err error) {
	env, cleanup, err := a.installTestPins(ctx, name)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	done := a.ui.Step("provision", name)
	err = a.agent(ctx, a.provisionTransport(name, env), nil, nil, a.provisionArgv()...)
	done(err)
	return err
}

// pack packs the stopped builder and publishes the artifact atomically.
func (a *app) pack(ctx context.Context, name string) (string, error) {
	tmp := filepath.Join(a.cfg.ImagesDir(), "hermes-base.tmp-"+strconv.Itoa(os.Getpid()))
	packed := tmp + ".smolmachine"
	cleanup := func() { os.Remove(tmp); os.Remove(packed) }
	cleanup()
	defer cleanup()
	done := a.ui.Step("pack", a.baseArtifact())
	err := a.vm.PackCreate(ctx, smolvm.PackSpec{FromVM: name, Smolfile: filepath.Join(a.cfg.ProjectRoot, "Smolfile"), Output: tmp})
	if err == nil {
		err = publishArtifact(packed, a.baseArtifact())
	}
	done(err)
	if err != nil {
		return "", err
	}
	return a.baseArtifact(), nil
}

func publishArtifact(packed, dst string) error {
	f, err := os.Open(packed)
	if err != nil {
		return fmt.Errorf("smolvm pack create left no %s: %w", packed, err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(packed, dst); err != nil {
		return fmt.Errorf("publishing the base image: %w", err)
	}
	return nil
}

// tail is the last line or so of a command's stderr, for error messages.
func tail(b []byte) string {
	const max = 400
	s := string(b)
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	if s == "" {
		return "no output"
	}
	return s
}
