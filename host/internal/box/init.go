package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/netmode"
)

// Init checks the host, builds the base image in a disposable builder,
// creates the box from it, copies the documents docs into its work dir and
// waits until it is healthy, all under the operation lock.
func Init(ctx context.Context, b *Box, docs []string) error {
	useConfiguration(b)
	return interrupted(ctx, b, "init", withLock(b, func() error { return initBox(ctx, b, docs) }))
}

// InitPlan is the host steps init runs when nothing fails, in order, for
// the documents docs and the configuration: the plan its progress numbers
// ("[3/15] builder-create"). The agent's steps inside provision are not
// counted. TestInitStepNumbers holds init's output to it.
func InitPlan(b *Box, docs []string) []string {
	useConfiguration(b)
	plan := []string{"preflight", "key", "builder-create", "builder-start", "agent-copy", "network", "provision",
		"builder-stop", "pack", "builder-delete", "create", "start", "hostkey"}
	for range docs {
		plan = append(plan, "document")
	}
	plan = append(plan, "listener", "health")
	if b.cfg.ExecutorEnabled {
		plan = append(plan, "discovery")
	}
	// afterStart: the secrets delivered, the network mode proven, and the
	// gateway waited for again when it got secrets.
	if len(b.cfg.Secrets) > 0 {
		plan = append(plan, "secrets")
	}
	if netmode.Proven(b.cfg.NetworkMode) {
		plan = append(plan, "network")
	}
	if len(b.cfg.Secrets) > 0 {
		plan = append(plan, "health")
	}
	return plan
}

// initBox is the whole of init, under the operation lock.
func initBox(ctx context.Context, b *Box, docs []string) error {
	done := b.ui.Step("preflight", "host, smolvm "+b.cfg.MachineName)
	err := preflight(ctx, b, docs)
	done(err)
	if err != nil {
		return err
	}
	if err := reapBuilder(ctx, b); err != nil {
		return err
	}
	if err := ensureKey(b); err != nil {
		return err
	}
	artifact, err := buildBase(ctx, b)
	if err != nil {
		return err
	}
	if err := createRuntime(ctx, b, artifact); err != nil {
		return err
	}
	if err := firstStart(ctx, b, docs); err != nil {
		return firstStartFailed(b, err)
	}
	return nil
}

// ensureKey creates the project key unless the user supplies one.
func ensureKey(b *Box) error {
	path := b.cfg.SSHKeyPath()
	if b.cfg.ExternalSSHKey() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the configured SSH key %s (HERMES_BOX_SSH_KEY) does not exist", path)
		}
	}
	done := b.ui.Step("key", path)
	_, err := keys.EnsureProjectKey(path, b.cfg.MachineName)
	done(err)
	return err
}

// firstStart starts the new box, pins its host key out of band, copies the
// user's documents in and waits until it is healthy.
func firstStart(ctx context.Context, b *Box, docs []string) error {
	name := b.cfg.MachineName
	secrets, deliver, err := startMachine(ctx, b, name)
	if err != nil {
		return err
	}
	if err := pinHostKey(ctx, b, name); err != nil {
		return errors.Join(err, stopMachine(ctx, b, name))
	}
	if err := copyDocuments(ctx, b, name, docs); err != nil {
		return errors.Join(err, stopMachine(ctx, b, name))
	}
	if err := verifyRunning(ctx, b); err != nil {
		return errors.Join(err, stopMachine(ctx, b, name))
	}
	if err := afterStart(ctx, b, name, b.cfg.SSHPort, secrets, deliver); err != nil {
		return errors.Join(err, stopMachine(ctx, b, name))
	}
	return nil
}

// firstStartFailed explains how to go on after the first start failed; the
// machine is kept.
func firstStartFailed(b *Box, err error) error {
	n := b.cfg.MachineName
	return fmt.Errorf("first start of the box failed: %w\n\n"+
		"The machine %q was kept (stopped), so nothing built is lost; it may hold injected secrets.\n"+
		"  retry:    hermes-box start, then hermes-box status and hermes-box logs\n"+
		"  rebuild:  hermes-box destroy --force && hermes-box init", err, n)
}
