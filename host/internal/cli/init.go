package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/keys"
)

func newInitCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Build the base image in a disposable builder and create the box",
		Long: "init checks the host, builds the base image in a disposable builder machine (always deleted\n" +
			"afterwards), creates the box from it, pins its SSH host key and waits until it is healthy.",
		Args: cobra.NoArgs,
		RunE: initAction,
	}
	cmd.Flags().StringArray("document", nil, "copy FILE (e.g. SOUL.md, USER.md) into /workspace/work in the box; repeatable")
	return cmd
}

func initAction(cmd *cobra.Command, _ []string) error {
	a, err := newApp(cmd)
	if err != nil {
		return err
	}
	docs, _ := cmd.Flags().GetStringArray("document")
	return a.withLock(func() error { return a.initBox(cmd.Context(), docs) })
}

// initBox is the whole of init, under the operation lock.
func (a *app) initBox(ctx context.Context, docs []string) error {
	done := a.ui.Step("preflight", "host, smolvm "+a.cfg.MachineName)
	err := a.preflight(ctx, docs)
	done(err)
	if err != nil {
		return err
	}
	if err := a.ensureKey(); err != nil {
		return err
	}
	artifact, err := a.buildBase(ctx)
	if err != nil {
		return err
	}
	if err := a.createRuntime(ctx, artifact); err != nil {
		return err
	}
	if err := a.firstStart(ctx, docs); err != nil {
		return a.firstStartFailed(err)
	}
	a.handoff()
	return nil
}

// ensureKey creates the project key unless the user supplies one.
func (a *app) ensureKey() error {
	path := a.cfg.SSHKeyPath()
	if a.cfg.ExternalSSHKey() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the configured SSH key %s (HERMES_BOX_SSH_KEY) does not exist", path)
		}
	}
	done := a.ui.Step("key", path)
	_, err := keys.EnsureProjectKey(path, a.cfg.MachineName)
	done(err)
	return err
}

// firstStart starts the new box, pins its host key out of band, copies the
// user's documents in and waits until it is healthy.
func (a *app) firstStart(ctx context.Context, docs []string) error {
	name := a.cfg.MachineName
	secrets, deliver, err := a.startSecrets(name)
	if err != nil {
		return err
	}
	done := a.ui.Step("start", name)
	err = a.vm.Start(ctx, name)
	done(err)
	if err != nil {
		return err
	}
	if err := a.pinHostKey(ctx, name); err != nil {
		return errors.Join(err, a.stopMachine(name))
	}
	if err := a.copyDocuments(ctx, name, docs); err != nil {
		return errors.Join(err, a.stopMachine(name))
	}
	if err := a.verifyRunning(ctx); err != nil {
		return errors.Join(err, a.stopMachine(name))
	}
	if err := a.afterStart(ctx, name, a.cfg.SSHPort, secrets, deliver); err != nil {
		return errors.Join(err, a.stopMachine(name))
	}
	return nil
}

// firstStartFailed explains how to go on after the first start failed; the
// machine is kept.
func (a *app) firstStartFailed(err error) error {
	n := a.cfg.MachineName
	return fmt.Errorf("first start of the box failed: %w\n\n"+
		"The machine %q was kept (stopped), so nothing built is lost; it may hold injected secrets.\n"+
		"  retry:    hermes-box start, then hermes-box status and hermes-box logs\n"+
		"  rebuild:  hermes-box destroy --force && hermes-box init", err, n)
}

// handoff prints what to do next.
func (a *app) handoff() {
	c := a.cfg
	fmt.Fprintf(a.stdout, `hermes-box is ready: machine %s, ssh boxadmin@127.0.0.1 -p %d (hermes-box ssh)

Next steps, inside the box (hermes-box ssh):
  hermes auth add openai-codex --type oauth   sign Hermes in
  hermes model                                choose the model
  codex login --device-auth                   sign Codex in
Then detach from tmux with Ctrl-b d.

Backups: hermes-box snapshot takes one; keep %s
with them (restores need it) and keep the SSH key %s safe.
If something is wrong: hermes-box status, hermes-box logs, hermes-box shell (root console).
`, c.MachineName, c.SSHPort, a.baseArtifact(), c.SSHKeyPath())
	if c.ExecutorEnabled {
		fmt.Fprintf(a.stdout, "Executor: http://localhost:%d (loopback only)\n", c.ExecutorPort)
	}
}
