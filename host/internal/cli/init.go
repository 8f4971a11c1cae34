package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
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
	cmd.Flags().StringArray("document", nil, "copy FILE (e.g. SOUL.md, USER.md) into "+boxlayout.WorkDir+" in the box; repeatable")
	cmd.Flags().Bool("keep-builder", false, "keep the builder machine when a build step fails in it, for inspection")
	return cmd
}

func initAction(cmd *cobra.Command, _ []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	docs, _ := cmd.Flags().GetStringArray("document")
	b.KeepBuilder, _ = cmd.Flags().GetBool("keep-builder")
	renderer(cmd).Plan(box.InitPlan(b, docs))
	err = box.Init(cmd.Context(), b, docs)
	renderer(cmd).Summary("init")
	if err != nil {
		return err
	}
	handoff(cmd.OutOrStdout(), b)
	return nil
}

// handoff prints what to do next.
func handoff(w io.Writer, b *box.Box) {
	c := b.Config()
	fmt.Fprintf(w, `hermes-box is ready: machine %s, ssh %s@127.0.0.1 -p %d (hermes-box ssh)

Next steps, inside the box (hermes-box ssh):
  hermes auth add openai-codex --type oauth   sign Hermes in
  hermes model                                choose the model
  codex login --device-auth                   sign Codex in
Then detach from tmux with Ctrl-b d.

Backups: hermes-box snapshot takes one; keep %s
with them (restores need it) and keep the SSH key %s safe.
If something is wrong: hermes-box status, hermes-box logs, hermes-box shell (root console).
`, c.MachineName, boxlayout.AdminUser, c.SSHPort, box.BaseArtifact(b), c.SSHKeyPath())
	if c.ExecutorEnabled {
		fmt.Fprintf(w, "Executor: http://localhost:%d (loopback only)\n", c.ExecutorPort)
	}
}
