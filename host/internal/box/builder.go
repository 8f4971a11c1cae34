package box

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// BaseArtifact is the packed base image the box is created from.
func BaseArtifact(b *Box) string { return filepath.Join(b.cfg.ImagesDir(), filenames.BaseArtifact) }

// buildBase builds the base image in a disposable builder and returns the
// artifact's path. The builder is deleted whatever happens, unless a step
// failed and KeepBuilder is set; a failure says that re-running init is
// safe.
func buildBase(ctx context.Context, b *Box) (artifact string, err error) {
	name := b.cfg.BuilderName
	defer func() {
		if err != nil {
			err = builderFailed(b, name, err)
		}
		if err != nil && b.KeepBuilder {
			b.ui.Warn("kept the failed builder %s for inspection: smolvm machine shell --name %s; delete it with smolvm machine delete --name %s --force before the next init", name, name, name)
			return
		}
		done := b.ui.Step("builder-delete", name)
		derr := removeMachine(ctx, b, name)
		done(derr)
		if derr == nil {
			unmarkBuilder(b)
		}
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting builder %s: %w (delete it with smolvm machine delete --name %s --force)", name, derr, name))
		}
	}()
	if err := markBuilder(b); err != nil {
		return "", err
	}
	if err := createBuilder(ctx, b, name); err != nil {
		return "", err
	}
	if err := installAgent(ctx, b, name); err != nil {
		return "", err
	}
	if err := waitBuilderNetwork(ctx, b, name); err != nil {
		return "", err
	}
	if err := provision(ctx, b, name); err != nil {
		return "", err
	}
	done := b.ui.Step("builder-stop", name)
	err = b.vm.Stop(ctx, name)
	done(err)
	if err != nil {
		return "", err
	}
	return pack(ctx, b, name)
}

// createBuilder creates the builder with a real NIC (virtio-net, not the
// portless TSI default) and boots it.
func createBuilder(ctx context.Context, b *Box, name string) error {
	c := b.cfg
	done := b.ui.Step("builder-create", fmt.Sprintf("%s from %s with build-time networking", name, pins.UbuntuImage))
	err := b.vm.Create(ctx, smolvm.CreateSpec{Name: name, Image: pins.UbuntuImage, CPUs: c.CPUs, MemoryMiB: c.MemoryMiB,
		StorageGB: c.StorageGB, OverlayGB: c.OverlayGB, Net: true, NetBackend: "virtio-net"})
	done(err)
	if err != nil {
		return err
	}
	// 1.0.4 can record network=true and still boot without a NIC: apply
	// --net again before the first boot.
	if err := b.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true}); err != nil {
		return err
	}
	done = b.ui.Step("builder-start", name)
	err = b.vm.Start(ctx, name)
	done(err)
	return err
}

// installAgent copies the agent for the guest's architecture and the
// project's public key into the builder.
func installAgent(ctx context.Context, b *Box, name string) error {
	done := b.ui.Step("agent-copy", agentBinary(b))
	err := b.vm.CopyIn(ctx, name, agentBinary(b), boxlayout.AgentPath)
	if err == nil {
		// smolvm cp does not keep the executable bit.
		err = execOK(ctx, b, name, "/bin/chmod", "0755", boxlayout.AgentPath)
	}
	if err == nil && b.cfg.ExecutorEnabled {
		err = b.vm.CopyIn(ctx, name, ociHelperBinary(b), boxlayout.OCIHelperPath)
		if err == nil {
			err = execOK(ctx, b, name, "/bin/chmod", "0755", boxlayout.OCIHelperPath)
		}
	}
	if err == nil {
		err = b.vm.CopyIn(ctx, name, b.cfg.SSHKeyPath()+keys.PubSuffix, boxlayout.AuthorizedKeysUpload)
	}
	done(err)
	return err
}

// execOK runs a short command in the machine and wants status 0.
func execOK(ctx context.Context, b *Box, name string, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timing.callTimeout)
	defer cancel()
	res, err := b.vm.Exec(ctx, smolvm.ExecSpec{Name: name, Argv: argv})
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
func waitBuilderNetwork(ctx context.Context, b *Box, name string) error {
	done := b.ui.Step("network", "waiting for the builder's IPv4 route and DNS")
	err := waitNetwork(ctx, b, waiting(b, name, "the builder's IPv4 route and DNS"), name, netcheckRelay(b, name),
		func(ctx context.Context) error { return cycleBuilder(ctx, b, name) })
	done(err)
	return err
}

// waitNetwork is waitBuilderNetwork's loop: netcheck over tr, cycle
// between two boots, w beating between the probes; the test hook names the
// host netcheck resolves instead of its default (the Ubuntu archive for
// the guest's architecture). A builder whose agent
// does not answer maxNoAnswers probes in a row ends the wait; one that
// answers "not ready" is probed again.
func waitNetwork(ctx context.Context, b *Box, w *waiter, name string, tr relay.Transport, cycle func(context.Context) error) error {
	t := b.timing
	ctx, cancel := context.WithTimeout(ctx, t.netTotal)
	defer cancel()
	var last error
	var unanswered noAnswers
	for boot := 1; boot <= t.netBoots; boot++ {
		if boot > 1 {
			b.ui.Warn("builder network unavailable after boot %d/%d; restarting the builder", boot-1, t.netBoots)
			if err := cycle(ctx); err != nil {
				return err
			}
		}
		for probe := 1; probe <= t.netProbes; probe++ {
			if last = agent.New(tr, nil).Netcheck(ctx, hookValue(hooks.netcheckHost)); last == nil {
				return nil
			}
			if err := unanswered.note(last); err != nil {
				return err
			}
			if ctx.Err() != nil {
				break
			}
			if err := w.beat(ctx, last); err != nil {
				return err
			}
			if probe < t.netProbes {
				sleep(ctx, t.netProbeInterval)
			}
		}
	}
	return fmt.Errorf("builder %s has no usable IPv4 route or DNS after %d boots: %w", name, t.netBoots, last)
}

// netcheckRelay is the smolvm-exec transport of the builder's netcheck,
// which smolvm ends in the box after agent.NetcheckKill.
func netcheckRelay(b *Box, name string) *relay.Exec {
	tr := directRelay(b, name)
	tr.Timeout = agent.NetcheckKill
	return tr
}

func cycleBuilder(ctx context.Context, b *Box, name string) error {
	if err := b.vm.Stop(ctx, name); err != nil {
		return err
	}
	if err := b.vm.Update(ctx, smolvm.UpdateSpec{Name: name, Net: true}); err != nil {
		return err
	}
	return b.vm.Start(ctx, name)
}

// provisionArgs is the agent's provision request. Digests for artifacts the
// pins do not cover travel only when the user configured them.
func provisionArgs(b *Box) agent.ProvisionArgs {
	return agent.ProvisionArgs{AuthorizedKeys: boxlayout.AuthorizedKeysUpload, HermesCommit: b.cfg.HermesCommit,
		UVSHA256: b.cfg.UVSHA256, CodexSHA256: b.cfg.CodexSHA256}
}

// provision runs the agent's provision verb through the smolvm-exec
// transport, rendering its progress.
func provision(ctx context.Context, b *Box, name string) (err error) {
	env, cleanup, err := installTestPins(ctx, b, name)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	done := b.ui.Step("provision", name)
	err = client(b, provisionTransport(b, name, env)).Provision(ctx, provisionArgs(b))
	done(err)
	return err
}

// pack packs the stopped builder and publishes the artifact atomically.
func pack(ctx context.Context, b *Box, name string) (string, error) {
	tmp := filepath.Join(b.cfg.ImagesDir(), filenames.BaseArtifactTemp+strconv.Itoa(os.Getpid()))
	packed := tmp + ".smolmachine"
	cleanup := func() { os.Remove(tmp); os.Remove(packed) }
	cleanup()
	defer cleanup()
	done := b.ui.Step("pack", BaseArtifact(b))
	err := b.vm.PackCreate(ctx, smolvm.PackSpec{FromVM: name, Smolfile: filepath.Join(b.cfg.ProjectRoot, "Smolfile"), Output: tmp})
	if err == nil {
		err = publishArtifact(packed, BaseArtifact(b))
	}
	done(err)
	if err != nil {
		return "", err
	}
	return BaseArtifact(b), nil
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
